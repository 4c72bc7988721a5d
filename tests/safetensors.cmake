# safetensors reader/writer (train/safetensors.c, issue 30): round trip in the
# reference writer's layout, sharded folders, every refusal of a hostile file
# or index; the fuzz target covers the header parser.
mks_add_test(test_safetensors SOURCES test_safetensors.c LIBS tr kn ds tk LABELS cpu TIMEOUT 120)
mks_add_fuzz(safetensors SOURCE fuzz_safetensors.c LIBS tr kn ds tk CORPUS data/fuzz/safetensors MAX_LEN 4096)
