# sources.cmake: the data layer's C sources (JSONL and Parquet records, the dispatcher between them,
# mixtures, the batcher, its prefetching thread), for the main CMakeLists.txt to include and add to
# the library, and the system libraries the Parquet reader links (Debian: zlib1g-dev, libzstd-dev, libsnappy-dev).
# The data tests build from test/c/test_data.c, test/c/test_parquet.c and test/c/test_prefetch.c;
# prefetch.c needs pthreads (Threads::Threads).
set(UFORM_DATA_SOURCES src/data/jsonl.c src/data/parquet.c src/data/corpus.c src/data/mixture.c src/data/batcher.c src/data/prefetch.c)
set(UFORM_DATA_LIBRARIES z zstd snappy)
