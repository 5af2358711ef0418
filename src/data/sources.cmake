# sources.cmake: the data layer's C sources (JSONL records, mixtures, the batcher), for the main
# CMakeLists.txt to include and add to the library. The data test builds from test/c/test_data.c.
set(UFORM_DATA_SOURCES src/data/jsonl.c src/data/mixture.c src/data/batcher.c)
