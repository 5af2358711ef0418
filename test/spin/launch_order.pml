/*  launch_order.pml: the order of collectives across ranks, as docs/distributed.md plans the
 *  multi-GPU step (not written yet: the seam is src/cuda/step.c's enqueue_, driven by
 *  src/train/cuda.c). Every rank runs the same sequence on its compute stream: the first step eager
 *  (it loads the kernels), then each slot's captured graph replayed; a graph's collectives are,
 *  in order, the all-reduce of the live counts and stop votes, the all-gather of the candidates'
 *  embeddings and keys, the reduce-scatter of their gradients, and the gradient all-reduce (or
 *  ZeRO-1's reduce-scatter and all-gather, which take the same places); every CHECKPOINT steps the
 *  host adds one eager collective after the step (the save's all-reduce of rank 0's status, with
 *  ZeRO-1 the optimizer shards' gather before it).
 *
 *  NCCL matches collectives on a communicator by their order alone: the i-th call of every rank
 *  meets the i-th call of every other, whatever each is. So a collective is a rendezvous on its
 *  sequence number: a rank arrives with its kind, and leaves once every rank has arrived there;
 *  kinds that differ at one sequence number are a mismatch (NCCL would hang or exchange garbage),
 *  and so is a captured call meeting an eager one (NCCL requires capture to be uniform across
 *  ranks). A rank that never arrives leaves the others blocked: an invalid end state.
 *
 *  Properties: at every sequence number all ranks bring the same kind, captured or not
 *  (assertion); every rank runs every step (no deadlock).
 *
 *  Planted bugs (spin -DPLANT=N):
 *  1  a rank skips the optimizer's collective when its own loss is not finite (a host-side branch
 *     on rank-local data): mismatch or deadlock;
 *  2  only rank 0, the writer, calls the checkpoint's collective: its call meets the others' next
 *     counts all-reduce (mismatch), or, after the last step, nobody's (deadlock);
 *  3  the last rank skips the eager first step and captures from step 0 (its kernels were already
 *     loaded): a captured collective meets an eager one (assertion).
 *  RANKS (2 or 3), STEPS and CHECKPOINT are macros. */

#ifndef RANKS
#define RANKS 2
#endif
#ifndef STEPS
#define STEPS 4
#endif
#ifndef CHECKPOINT
#define CHECKPOINT 2
#endif
#ifndef PLANT
#define PLANT 0
#endif

/* collective kinds; + CAPTURED when the call sits in a captured graph */
#define COUNTS 1     /* all-reduce: live anchors, candidates, scored cells, stop votes */
#define GATHER 2     /* all-gather: candidates' embeddings and content keys */
#define SCATTER 3    /* reduce-scatter: the candidates' embedding gradients */
#define GRADIENTS 4  /* all-reduce of the gradient arena (ZeRO-1: reduce-scatter, then all-gather) */
#define SAVE 5       /* eager, after a checkpoint step: rank 0's save status */
#define CAPTURED 8

#define PER_STEP 4
#define CALLS (STEPS * PER_STEP + STEPS / CHECKPOINT + 1)

typedef call_t { byte kind[RANKS] };
call_t calls[CALLS];   /* the kind each rank brought to each sequence number, 0 not yet */
byte arrived[CALLS];   /* how many ranks arrived at each sequence number */
byte steps_run[RANKS];

/* one collective call of rank r: arrive, wait for everyone, check the kinds met */
inline collective(r, what) {
    assert(sequence < CALLS);
    atomic { calls[sequence].kind[r] = what; arrived[sequence]++ }
    (arrived[sequence] == RANKS);
    k = 0;
    do
    :: k < RANKS -> assert(calls[sequence].kind[k] == what); k++
    :: else -> break
    od;
    sequence++
}

proctype rank(byte r) {
    byte t = 0, sequence = 0, k, captured;
    bool finite;
    do
    :: t < STEPS ->
        /* run_: eager once (step 0), then each slot's graph is captured and replayed */
        captured = (t > 0 -> CAPTURED : 0);
#if PLANT == 3
        if
        :: r == RANKS - 1 -> captured = CAPTURED
        :: else -> skip
        fi;
#endif
        collective(r, COUNTS + captured);
        collective(r, GATHER + captured);
        collective(r, SCATTER + captured);
#if PLANT == 1
        if
        :: finite = true
        :: finite = false /* this rank's loss came out NaN */
        fi;
        if
        :: finite -> collective(r, GRADIENTS + captured)
        :: else -> skip
        fi;
#else
        collective(r, GRADIENTS + captured);
#endif
        t++;
        steps_run[r] = t;
        if
        :: t % CHECKPOINT == 0 -> /* the host syncs; rank 0 writes; all agree on its status */
#if PLANT == 2
            if
            :: r == 0 -> collective(r, SAVE)
            :: else -> skip
            fi
#else
            collective(r, SAVE)
#endif
        :: else -> skip
        fi
    :: else -> break
    od;
    assert(steps_run[r] == STEPS)
}

init {
    byte r = 0;
    atomic {
        do
        :: r < RANKS -> run rank(r); r++
        :: else -> break
        od
    }
}
