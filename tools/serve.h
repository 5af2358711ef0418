/*  serve.h: `uform serve`, the HTTP server of embeddings and reranking (tools/serve.c). */
#ifndef UFORM_TOOLS_SERVE_H
#define UFORM_TOOLS_SERVE_H

/** Runs `uform serve` with the command line of `uform` (argv[1] is "serve"); returns the exit code. */
int uform_serve(int argc, char **argv);

#endif
