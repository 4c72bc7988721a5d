# Trainer on hostile inputs (issue 12): checkpoints, outputs over inputs,
# strict numeric options, ids beyond the vocabulary, special files.
mks_add_test(test_train_hostile SOURCES test_train_hostile.c LIBS tr kn ds tk LABELS cpu TIMEOUT 120)
# train_hostile_gen crafts the hostile shard sets at test time and writes the
# `ckpt` fuzz seed corpus (tests/data/fuzz/ckpt: train_hostile_gen ckpt-corpus DIR)
add_executable(train_hostile_gen train_hostile_gen.c)
target_link_libraries(train_hostile_gen PRIVATE tr kn ds tk m)
add_test(NAME cli_train_hostile
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/train_hostile.sh $<TARGET_FILE:mkshards> ${MKS_SHARED_DIR}
                 ${CMAKE_CURRENT_SOURCE_DIR}/data $<TARGET_FILE:train_hostile_gen>)
set_tests_properties(cli_train_hostile PROPERTIES LABELS cpu SKIP_RETURN_CODE 77 TIMEOUT 600)
mks_add_fuzz(ckpt SOURCE fuzz_ckpt.c LIBS tr kn ds tk CORPUS data/fuzz/ckpt MAX_LEN 4096)
# the shard-set refusals that ds_shardset_open makes (shard listed twice,
# FIFO manifest / shard), seen end to end through llmtrain
add_test(NAME cli_train_hostile_set
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/train_hostile.sh $<TARGET_FILE:mkshards> ${MKS_SHARED_DIR}
                 ${CMAKE_CURRENT_SOURCE_DIR}/data $<TARGET_FILE:train_hostile_gen> set)
set_tests_properties(cli_train_hostile_set PROPERTIES LABELS cpu SKIP_RETURN_CODE 77 TIMEOUT 300)
