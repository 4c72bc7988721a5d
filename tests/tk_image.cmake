# Table images (tokenizer/tk_image.c): the fuzz target of the image reader,
# next to gpt2's real rank file (seeds: tests/data/fuzz/make_tk_image_seeds.py;
# test_tk_image, in tokenizer.cmake, holds the regression tests).
mks_add_fuzz(tk_image SOURCE fuzz_tk_image.c LIBS tk CORPUS data/fuzz/tk_image MAX_LEN 4096)
