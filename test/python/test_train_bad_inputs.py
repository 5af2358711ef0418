# test_train_bad_inputs.py: wrong training batches and misused trainer calls (train.h) must give
# a non-zero status and a message saying the problem, and never crash: each case runs in a child
# process (isolated.py), so a crash fails one test with its signal. Covered: MLM targets out of
# range or missing, anchor / candidate indices past the batch's segments, zero anchors or
# candidates, an objective (or TCR) whose head the checkpoint lacks, a batch larger than the
# trainer was made for, and misuse of create / apply / read / load_state.

import pytest

import isolated
import train_contract

FORMAT, IO, SHAPE, MISSING, INVALID, UNSUPPORTED, OUT_OF_MEMORY = 3, 2, 4, 5, 1, 7, 6

# One row of 16 cells: segment 0 in cells 0..7, segment 1 in cells 8..14, padding in cell 15.
# Cell 3 is masked (MASK in the grid, its byte 65 in `targets`). A trainer for 32 cells.
PREAMBLE = """
kinds = np.zeros((1, 16), np.uint8); kinds[0, 15] = 4
values = np.full((1, 16), 65, np.uint32); values[0, 3] = 256
segments = np.zeros((1, 16), np.int32); segments[0, 8:15] = 1; segments[0, 15] = -1
positions = np.zeros((1, 16, 3), np.int32)
positions[0, :8] = np.arange(8)[:, None]; positions[0, 8:15] = np.arange(7)[:, None]
targets = np.full((1, 16), -1, np.int32); targets[0, 3] = 65
def mlm(targets=targets):
    return TrainBatch(kinds, values, segments, positions, targets=targets)
def pairs(anchors=(0,), candidates=(1,), labels=((1,),)):
    return TrainBatch(kinds, values, segments, positions, anchors=np.array(anchors, np.uint32),
                      candidates=np.array(candidates, np.uint32), labels=np.array(labels, np.uint8).reshape(len(anchors), len(candidates)))
def trainer(objective=0, cells=32, **fields):
    return model.trainer(library.train_options(objective=objective, **fields), cells)
def changed(array, index, value):
    array = array.copy(); array[index] = value; return array
"""


@pytest.fixture(scope="module")
def good_model(library, tmp_path_factory):
    return train_contract.python_checkpoint(tmp_path_factory.mktemp("train_good_64x1"), 64, 1, 21)


@pytest.fixture(scope="module")
def headless_models(tmp_path_factory):
    """Checkpoints without one head each: mlm.head, the pool head, rerank.proj."""
    drops = {"mlm": ("mlm.head",), "pool": ("pool.query", "pool.proj"), "rerank": ("rerank.proj",)}
    return {head: train_contract.python_checkpoint(tmp_path_factory.mktemp(f"no_{head}"), 64, 1, 22, drop=names)
            for head, names in drops.items()}


def run(library, code, directory):
    return isolated.run(library.path, PREAMBLE + code, directory)


def test_good_batches_are_accepted(library, good_model):
    """The preamble's batches are valid: otherwise the cases below would prove nothing."""
    code = ("t = trainer(0); t.gradients(mlm()); t.apply(); t.close()\n"
            "t = trainer(1); t.gradients(pairs()); t.close()\n"
            "t = trainer(2); t.gradients(pairs(anchors=(0, 1), candidates=(0, 1), labels=((1, 0), (0, 1)))); t.close()")
    outcome = run(library, code, good_model)
    assert outcome.status == 0, outcome


# name -> (code run after the preamble, statuses accepted, words of which the message must hold one)
BATCH_CASES = {
    "MLM target 256 (MASK is no byte)": ("trainer(0).gradients(mlm(changed(targets, (0, 3), 256)))",
                                         {INVALID, FORMAT}, ("target", "256", "range")),
    "MLM target 1000": ("trainer(0).gradients(mlm(changed(targets, (0, 3), 1000)))",
                        {INVALID, FORMAT}, ("target", "1000", "range")),
    "MLM target below -1": ("trainer(0).gradients(mlm(changed(targets, (0, 3), -7)))",
                            {INVALID, FORMAT}, ("target", "-7", "range")),
    "MLM target on a padding cell": ("trainer(0).gradients(mlm(changed(targets, (0, 15), 65)))",
                                     {INVALID, FORMAT}, ("target", "padding", "cell 15", "15")),
    "MLM without masked cells": ("trainer(0).gradients(mlm(np.full((1, 16), -1, np.int32)))",
                                 {INVALID}, ("mask", "target", "no cell", "zero", "empty", "scor", "nothing")),
    "MLM without targets": ("trainer(0).gradients(mlm(None))", {INVALID}, ("null", "target")),
    "contrastive anchor past the segments": ("trainer(1).gradients(pairs(anchors=(5,)))",
                                             {INVALID, FORMAT}, ("anchor", "5", "range", "segment")),
    "contrastive candidate past the segments": ("trainer(1).gradients(pairs(candidates=(2,)))",
                                                {INVALID, FORMAT}, ("candidate", "2", "range", "segment")),
    "rerank anchor past the segments": ("trainer(2).gradients(pairs(anchors=(4000000000,)))",
                                        {INVALID, FORMAT}, ("anchor", "4000000000", "range", "segment")),
    "rerank candidate past the segments": ("trainer(2).gradients(pairs(candidates=(1, 3), labels=((1, 0),)))",
                                           {INVALID, FORMAT}, ("candidate", "3", "range", "segment")),
    "contrastive zero anchors": ("trainer(1).gradients(pairs(anchors=(), labels=()))",
                                 {INVALID}, ("anchor", "zero", "empty", "count")),
    "rerank zero anchors": ("trainer(2).gradients(pairs(anchors=(), labels=()))",
                            {INVALID}, ("anchor", "zero", "empty", "count")),
    "contrastive zero candidates": ("trainer(1).gradients(pairs(candidates=(), labels=()))",
                                    {INVALID}, ("candidate", "zero", "empty", "count")),
    "contrastive NULL labels": ("b = pairs(); b.labels = None; trainer(1).gradients(b)", {INVALID}, ("null", "label")),
    "batch larger than the trainer's cells": ("trainer(0, cells=8).gradients(mlm())",
                                              {INVALID, SHAPE}, ("cells", "16", "8", "capacity", "large")),
    "NULL batch": ("t = trainer(0); library.call('uform_trainer_gradients', t.handle, None, ctypes.byref(LossesStruct()))",
                   {INVALID}, ("null", "batch")),
    "NULL trainer": ("b, keep = mlm().struct(); library.call('uform_trainer_gradients', None, ctypes.byref(b), ctypes.byref(LossesStruct()))",
                     {INVALID}, ("null", "trainer")),
}


@pytest.mark.parametrize("case", list(BATCH_CASES))
def test_wrong_batch_is_refused(library, good_model, case):
    code, statuses, words = BATCH_CASES[case]
    isolated.assert_refused(case, run(library, code, good_model), statuses, words)


# (head dropped, code, words): the trainer may refuse at create or at the first gradients call.
HEAD_CASES = {
    "MLM without mlm.head": ("mlm", "trainer(0).gradients(mlm())", ("mlm.head", "mlm")),
    "contrastive without the pool head": ("pool", "trainer(1).gradients(pairs())", ("pool",)),
    "rerank without rerank.proj": ("rerank", "trainer(2).gradients(pairs())", ("rerank",)),
    "TCR without the pool head": ("pool", "trainer(0, tcr_lambda=0.1).gradients(mlm())", ("pool", "tcr")),
    "Lipschitz without the pool head": ("pool", "trainer(0, lipschitz_lambda=0.1).gradients(mlm())", ("pool", "lipschitz")),
}


@pytest.mark.parametrize("case", list(HEAD_CASES))
def test_objective_without_its_head_is_missing(library, headless_models, case):
    head, code, words = HEAD_CASES[case]
    isolated.assert_refused(case, run(library, code, headless_models[head]), {MISSING}, words)


def test_objective_without_its_head_runs_where_not_needed(library, headless_models):
    """A head the objective does not use may be absent: MLM without the pool or rerank head."""
    for head in ("pool", "rerank"):
        outcome = run(library, "trainer(0).gradients(mlm())", headless_models[head])
        assert outcome.status == 0, f"MLM refused on a checkpoint without the {head} head: {outcome}"


CALL_CASES = {
    "unknown objective": ("trainer(7)", {INVALID}, ("objective", "7")),
    "beta2 of 1 (no bias correction possible)": ("trainer(0, beta2=1.0)", {INVALID}, ("beta2", "beta")),
    "beta1 past 1": ("trainer(0, beta1=1.5)", {INVALID}, ("beta1", "beta")),
    "clip of zero": ("trainer(0, clip=0.0)", {INVALID}, ("clip",)),
    "negative learning rate": ("trainer(0, learning_rate=-1.0)", {INVALID}, ("learning", "rate")),
    "zero cells": ("trainer(0, cells=0)", {INVALID}, ("cells", "zero")),
    "create on a NULL model": ("h = ctypes.c_void_p(); o = library.train_options(); "
                               "library.call('uform_trainer_create', None, ctypes.byref(o), 32, ctypes.byref(h))",
                               {INVALID}, ("null", "model")),
    "apply before any gradients": ("trainer(0).apply()", {INVALID}, ("gradient",)),
    "read an unknown tensor": ("trainer(0).read('blocks.9.qkv', 0, 10)", {MISSING, INVALID}, ("blocks.9.qkv",)),
    "read with a wrong count": ("trainer(0).read('final_norm', 0, 63)", {SHAPE, INVALID}, ("final_norm", "63", "count")),
    "read column moments of a vector": ("trainer(0).read('final_norm', 4, 64)", {INVALID, SHAPE, MISSING},
                                        ("final_norm", "column", "vector")),
    "read an unknown slot": ("trainer(0).read('final_norm', 9, 64)", {INVALID}, ("slot", "9")),
    "load state from a missing file": ("trainer(0).load_state('/nonexistent/state.safetensors')", {IO},
                                       ("/nonexistent/state.safetensors",)),
}


@pytest.mark.parametrize("case", list(CALL_CASES))
def test_misused_trainer_call_is_refused(library, good_model, case):
    code, statuses, words = CALL_CASES[case]
    isolated.assert_refused(case, run(library, code, good_model), statuses, words)
