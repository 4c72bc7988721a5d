# Hostile command lines and output folders for mkshards (issue 12: outputs that
# name inputs, build --out around inputs, DIR/.lock, tampered shards and
# "up to date", all-rejected builds, EFBIG messages, numeric option values,
# corrupt build.ckpt). Included by tests/CMakeLists.txt.
mks_add_cli_test(cli_hostile cli_hostile.sh LABELS cpu TIMEOUT 180)
