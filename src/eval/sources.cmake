# sources.cmake: the evaluation layer's C sources (ranking metrics, the TF-IDF baseline), for the
# main CMakeLists.txt to include and give to uform_eval and test_eval (not to the library).
set(UFORM_EVAL_SOURCES src/eval/metrics.c src/eval/tfidf.c)
