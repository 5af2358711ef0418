/*  step_pipeline.pml: one rank's step pipeline, the host's double-buffered batches against the GPU's
 *  two streams, as src/train/cuda.c (uform_train_cuda_submit / _sync) and src/cuda/step.c (upload_,
 *  run_, uform_cuda_step_wait) run it today on one GPU, and as every rank of docs/distributed.md
 *  will run it (a rank's graph adds collectives, which this model does not need: they are
 *  test/spin/launch_order.pml's). The host fills the pinned slot t % 2, the copy stream uploads it
 *  and records `uploaded[slot]`, the compute stream waits on that event, replays the slot's graph
 *  (which ends by copying the loss into the slot's pinned loss buffer) and records `done[slot]`;
 *  the host then waits step t - 1's `done` and reads its loss.
 *
 *  CUDA events are generation counters: a record bumps `recorded` on the host and sets `completed`
 *  when its stream reaches it; a wait (cudaEventSynchronize, cudaStreamWaitEvent) takes the
 *  generation recorded at the call and blocks until it completes.
 *
 *  Properties (assertions, and Spin's invalid end states for deadlock):
 *  - no slot is overwritten while it is read: the host never fills a pinned slot the copy stream is
 *    reading, the copy stream never writes a device slot a graph is reading;
 *  - no step reads a half-written or stale slot: a copy reads the batch of its own step, whole, and
 *    a graph reads the device slot holding its own step's batch;
 *  - no stale loss: the host reads step t - 1's own loss (the loss carries its step: an epoch);
 *  - no deadlock: every step finishes and the streams drain.
 *
 *  Planted bugs (spin -DPLANT=N), each one line of the code away from today's:
 *  1  the compute stream does not wait on `uploaded[slot]` (cudaStreamWaitEvent dropped from upload_):
 *     a graph reads its slot before the copy lands (assertion);
 *  2  the host reads step t - 1's loss without waiting on its `done` event (stale epoch read:
 *     assertion);
 *  3  one pinned staging buffer for both device slots: the host refills it while the previous
 *     step's copy may still read it (assertion).
 *  -DNO_TOP_WAIT removes submit's wait on the slot's own previous step; it is no bug (the previous
 *  submit's wait on step t - 1 implies it) and Spin finds no error: the wait is kept as the
 *  guarantee that does not depend on the next line. */

#ifndef STEPS
#define STEPS 6
#endif
#ifndef PLANT
#define PLANT 0
#endif

#if PLANT == 3
#define STAGING(slot) 0
#else
#define STAGING(slot) (slot)
#endif

mtype = { COPY, RECORD_UPLOADED, WAIT_UPLOADED, GRAPH, RECORD_DONE };

chan copy_stream = [2 * STEPS] of { mtype, byte, byte };    /* op, slot, step + 1 or event generation */
chan compute_stream = [3 * STEPS] of { mtype, byte, byte };

byte uploaded_recorded[2], uploaded_completed[2]; /* the events, one pair per slot */
byte done_recorded[2], done_completed[2];

byte staging[2];  /* the pinned host slot: step + 1 of the batch it holds, 0 none */
bool writing[2];  /* the host is filling it */
byte device[2];   /* the device slot: step + 1 of the batch it holds */
bool copying[2];  /* the copy stream is reading staging [STAGING(s)] into device [s] */
bool reading[2];  /* a graph is reading device [s] */
byte loss[2];     /* the pinned loss slot: step + 1 of the loss it holds */
byte finished;    /* steps whose loss the host read */

/* cudaEventSynchronize(done [slot]) */
inline wait_done(event_slot) {
    target = done_recorded[event_slot];
    (done_completed[event_slot] >= target)
}

active proctype host() {
    byte t = 0, slot, staged, target;
    bool pending = false;
    do
    :: t < STEPS ->
        slot = t % 2;
        staged = STAGING(slot);
#ifndef NO_TOP_WAIT
        wait_done(slot); /* uform_cuda_step_wait(slot): the slot's last step, t - 2 */
#endif
        /* uform_cuda_batch_fill and _finish write the pinned slot in place */
        assert(!copying[staged]);
        writing[staged] = true;
        staging[staged] = t + 1;
        assert(!copying[staged]);
        writing[staged] = false;
        /* upload_: the copy, its event, the compute stream's wait; run_: the graph, its event */
        copy_stream!COPY, slot, t + 1;
        uploaded_recorded[slot]++;
        copy_stream!RECORD_UPLOADED, slot, uploaded_recorded[slot];
        compute_stream!WAIT_UPLOADED, slot, uploaded_recorded[slot];
        compute_stream!GRAPH, slot, t + 1;
        done_recorded[slot]++;
        compute_stream!RECORD_DONE, slot, done_recorded[slot];
        if
        :: pending -> /* step t - 1 in the other slot: wait, then read its loss */
#if PLANT != 2
            wait_done(1 - slot);
#endif
            assert(loss[1 - slot] == t); /* step t - 1's own loss */
            finished++
        :: else -> skip
        fi;
        pending = true;
        t++
    :: else -> break
    od;
    /* uform_train_cuda_sync: the pending step */
    slot = (t - 1) % 2;
    wait_done(slot);
    assert(loss[slot] == t);
    finished++;
    assert(finished == STEPS)
}

active proctype copy_engine() {
    mtype op;
    byte slot, value;
end:
    do
    :: copy_stream?op, slot, value ->
        if
        :: op == COPY ->
            assert(!writing[STAGING(slot)]);
            assert(!reading[slot]);
            copying[slot] = true;
            assert(staging[STAGING(slot)] == value); /* the batch of this copy's step, whole */
            device[slot] = staging[STAGING(slot)];
            copying[slot] = false
        :: op == RECORD_UPLOADED -> uploaded_completed[slot] = value
        fi
    od
}

active proctype compute_engine() {
    mtype op;
    byte slot, value;
end:
    do
    :: compute_stream?op, slot, value ->
        if
        :: op == WAIT_UPLOADED ->
#if PLANT != 1
            (uploaded_completed[slot] >= value)
#else
            skip
#endif
        :: op == GRAPH ->
            assert(!copying[slot] && device[slot] == value); /* its own step's batch, landed */
            reading[slot] = true;
            assert(!copying[slot]);
            reading[slot] = false;
            loss[slot] = value /* the graph's last node: the loss copied to the pinned slot */
        :: op == RECORD_DONE -> done_completed[slot] = value
        fi
    od
}
