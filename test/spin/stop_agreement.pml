/*  stop_agreement.pml: how every rank stops after the same step, as docs/distributed.md plans it
 *  (not written yet: uform_base's SIGINT / SIGTERM handling and src/train/cuda.c's submit, per
 *  rank). A signal reaches any subset of the ranks at any time (the launcher forwards it, or one
 *  process is signalled alone); a rank's host reads its handler's flag once a submit, so the model
 *  lets the flag rise at any submit. The host writes its vote (the flag) into the step's pinned
 *  slot; the graph's first collective all-reduces the votes with the live counts, and its last node
 *  copies the sum, tagged with the step's number, into the slot's pinned loss buffer.
 *  uform_train_cuda_submit launches step t, then waits step t - 1 and reads its sum: every rank
 *  reads the same sum for t - 1, and every rank has launched t before reading it, so a nonzero sum
 *  makes every rank stop after step t. They drain, save (rank 0 writes; all join the save's
 *  all-reduce) and exit with 128 + the signal.
 *
 *  The result slot is picked by the step counter (slot = step % 2), and each result carries the
 *  step that wrote it: the host checks the tag it reads against the step it waited for, so a read
 *  of the wrong slot or before the step finished is an error, not a silent disagreement.
 *
 *  Properties: every result read is the waited step's own (no stale epoch read: assertion); once
 *  all ranks finished, they ran the same number of steps, all of them when nobody voted, and at
 *  most two past the first step that carried a vote (the monitor's assertions; LTL `agree`); every
 *  rank finishes (no invalid end state; LTL `finish`, which a deadlock violates by stuttering short
 *  of it).
 *
 *  Planted bugs (spin -DPLANT=N):
 *  1  the host reads step t - 1's sum without waiting for it (stale epoch read: assertion);
 *  2  the slot of step t - 1's result computed as t % 2, the step counter off by one: it reads step
 *     t - 2's result, or step t's (stale epoch read: assertion);
 *  3  each rank stops on its own flag after the step in flight (the one-GPU rule of today's
 *     uform_base) instead of the all-reduced vote: a rank signalled alone, or earlier, leaves the
 *     others blocked in a collective it never joins (invalid end state; `finish` violated).
 *  RANKS (2 or 3) and STEPS are macros. */

#ifndef RANKS
#define RANKS 2
#endif
#ifndef STEPS
#define STEPS 4
#endif
#ifndef PLANT
#define PLANT 0
#endif

bool requested[RANKS];         /* each rank's signal handler's flag */
byte vote[RANKS * STEPS];      /* the vote a rank put in step t's slot */
byte votes_in[STEPS + 1];      /* ranks that joined step t's all-reduce; [STEPS]: the save's */
byte vote_sum[STEPS];
byte launched[RANKS];          /* steps rank r's host launched */
byte completed[RANKS];         /* steps rank r's GPU finished */
byte result_tag[RANKS * 2];    /* per rank and slot: step + 1 of the result it holds, 0 none */
byte result_sum[RANKS * 2];
byte ran[RANKS];               /* steps each rank ran, once it finished */
bool finished[RANKS];
byte first_vote = 255;         /* the earliest step that carried a vote, 255 none */

/* rank r's compute stream: each launched step's all-reduce of the votes, then its result */
proctype gpu(byte r) {
    byte t = 0, slot;
end:
    do
    :: t < launched[r] ->
        atomic {
            vote_sum[t] = vote_sum[t] + vote[r * STEPS + t];
            votes_in[t]++
        };
        (votes_in[t] == RANKS);
        atomic { /* the tagged sum into the slot's pinned buffer, then the step's done event */
            slot = t % 2;
            result_tag[r * 2 + slot] = t + 1;
            result_sum[r * 2 + slot] = vote_sum[t];
            completed[r] = t + 1;
            t++
        }
    od
}

proctype host(byte r) {
    byte t = 0, slot, tag, sum;
    bool stop = false;
    do
    :: t < STEPS && !stop ->
        atomic { /* submit: the handler may have fired (only this vote reads its flag) */
            if
            :: !requested[r] -> requested[r] = true
            :: skip
            fi;
            (t < 2 || completed[r] + 1 >= t); /* the slot's last step, t - 2, finished */
            vote[r * STEPS + t] = requested[r]; /* the vote goes into the slot, the step is launched */
            if
            :: requested[r] && t < first_vote -> first_vote = t
            :: else -> skip
            fi;
            launched[r] = t + 1
        };
        if
        :: t > 0 ->
            atomic {
#if PLANT != 1
                (completed[r] >= t); /* uform_cuda_step_wait: step t - 1 finished */
#endif
#if PLANT == 2
                slot = t % 2;
#else
                slot = (t - 1) % 2;
#endif
                tag = result_tag[r * 2 + slot];
                sum = result_sum[r * 2 + slot]
            };
            assert(tag == t); /* step t - 1's own result */
            stop = sum > 0    /* every rank read this sum: all stop after step t */
        :: else -> skip
        fi;
#if PLANT == 3
        stop = requested[r];  /* the one-GPU rule: stop after the step in flight */
#endif
        t++
    :: else -> break
    od;
    atomic { (completed[r] >= launched[r]); votes_in[STEPS]++ } /* drain, then the save's all-reduce */
    atomic { (votes_in[STEPS] == RANKS); ran[r] = launched[r]; finished[r] = true }
}

/* once every rank finished: the same count of steps, all of them without a vote, and within two
 * steps of the first vote */
active proctype monitor() {
    byte r;
end:
    atomic {
        (finished[0] && finished[1]
#if RANKS > 2
         && finished[2]
#endif
        ) ->
        r = 0;
        do
        :: r < RANKS ->
            assert(ran[r] == ran[0]);
            assert(first_vote != 255 || ran[r] == STEPS);
            assert(first_vote == 255 || ran[r] <= first_vote + 2);
            r++
        :: else -> break
        od
    }
}

#if RANKS > 2
#define ALL_FINISHED (finished[0] && finished[1] && finished[2])
#define SAME_COUNT (ran[0] == ran[1] && ran[1] == ran[2])
#else
#define ALL_FINISHED (finished[0] && finished[1])
#define SAME_COUNT (ran[0] == ran[1])
#endif

/* as temporal properties: every rank finishes (a deadlock stutters forever short of it), and once
 * all have finished they ran the same steps */
ltl finish { <> ALL_FINISHED }
ltl agree { [] (ALL_FINISHED -> SAME_COUNT) }

init {
    byte r = 0;
    atomic {
        do
        :: r < RANKS -> run gpu(r); run host(r); r++
        :: else -> break
        od
    }
}
