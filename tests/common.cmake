# The common layer (dataset/common/mks_common.h): UTF-8 table + exhaustive
# differential, bounded regular-file reads, atomic writes, messages, clock.
mks_add_test(test_common SOURCES test_common.c LIBS mks_common LABELS cpu)
# Build and the readers (lint, hist, encode, tokenizer train) see the same
# files of a folder with every input kind, hidden names, links, other names.
mks_add_test(test_input_walk SOURCES test_input_walk.c LIBS ds tk PkgConfig::ZLIB PkgConfig::ZSTD LABELS cpu)
