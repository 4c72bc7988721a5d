# Shards, manifests and the shard tools on hostile inputs (issue 12 items 1,
# 2, 3, 5, 8, 13, 14, 15): crafted headers (size wrap-around, limits, ids,
# frame fields, flag bits), manifests (types, ranges, names with '/' or '..',
# a shard listed twice, duplicate keys, size limit), FIFOs in place of a
# shard / manifest / folder; every file is crafted at test time.
mks_add_test(test_hostile_shards SOURCES test_hostile_shards.c LIBS ds LABELS cpu TIMEOUT 120)
target_include_directories(test_hostile_shards PRIVATE ${PROJECT_SOURCE_DIR}/dataset)
# Per-token loss bits (version-2 shards, issue 28 item 3): masks through the
# packers, the writer, the reader, verify and the manifest's counts.
mks_add_test(test_loss_bits SOURCES test_loss_bits.c LIBS ds PkgConfig::JANSSON LABELS cpu TIMEOUT 120)
target_include_directories(test_loss_bits PRIVATE ${PROJECT_SOURCE_DIR}/dataset)
# ... into llmtrain's loader and the CPU model: loss and gradients equal PyTorch's
# cross entropy with ignore_index=-100 (tests/ref/make_loss_mask_fixture.py).
mks_add_test(test_loss_mask_train SOURCES test_loss_mask_train.c LIBS tr kn ds tk PkgConfig::JANSSON LABELS cpu
             TIMEOUT 120)
target_include_directories(test_loss_mask_train PRIVATE ${PROJECT_SOURCE_DIR}/dataset ${PROJECT_SOURCE_DIR}/train)
# hostile_shards_gen crafts shard files for the CLI test and writes the seed
# corpora of the `shard` and `manifest` fuzz targets
# (hostile_shards_gen corpus-shard DIR / corpus-manifest DIR).
add_executable(hostile_shards_gen hostile_shards_gen.c)
target_link_libraries(hostile_shards_gen PRIVATE ds m)
add_test(NAME cli_hostile_shards
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli_hostile_shards.sh $<TARGET_FILE:mkshards> ${MKS_SHARED_DIR}
                 ${CMAKE_CURRENT_SOURCE_DIR}/data $<TARGET_FILE:hostile_shards_gen>)
set_tests_properties(cli_hostile_shards PROPERTIES LABELS cpu SKIP_RETURN_CODE 77 TIMEOUT 300)
# shard: ds_shard_open + every row + ds_shard_verify on arbitrary bytes.
# manifest: ds_manifest_load / ds_shardset_open on an arbitrary manifest.json
# next to two valid shards, plus the tools' config/accounting parsers
# (dataset/build_manifest.c, in the ds library).
mks_add_fuzz(shard SOURCE fuzz_shard.c LIBS ds CORPUS data/fuzz/shard MAX_LEN 8192)
mks_add_fuzz(manifest SOURCE fuzz_manifest.c LIBS ds CORPUS data/fuzz/manifest MAX_LEN 16384)
