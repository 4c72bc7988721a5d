# Token shards: mkshards build / inspect / verify / merge, the shard reader API,
# the Python reader, and (slow) kill -9 + resume.
mks_add_test(test_shards SOURCES test_shards.c LIBS ds tk PkgConfig::JANSSON Threads::Threads LABELS cpu TIMEOUT 300)
add_dependencies(test_shards mkshards)
target_include_directories(test_shards PRIVATE ${PROJECT_SOURCE_DIR}/dataset)
mks_add_cli_test(cli_shards_kill cli_shards_kill.sh LABELS slow TIMEOUT 900)
mks_add_cli_test(py_shards_reader py_shards_reader.sh LABELS cpu TIMEOUT 300)
# Golden digests of build (pack x over-long x threads x part + merge, resume),
# encode, lint --json, hist --json on a slice of the shared corpus; recorded
# with tests/golden/record.sh (tests/data/golden/digests.txt).
# tokenizer.json shards: framing (--bos/--eos, manifest), u32 shards of Qwen2 trained by llmtrain
mks_add_cli_test(cli_hf_shards cli_hf_shards.sh LABELS cpu TIMEOUT 300)
mks_add_cli_test(golden_pipeline golden/golden.sh LABELS cpu TIMEOUT 600)
