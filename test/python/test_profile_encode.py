# test_profile_encode.py: bench/profile_encode.py's attribution of a GPU encode call's product launches to
# the block's four products (qkv, out, gate_up, down in launch order, then pool.proj), which docs/precision.md
# reads to find the slow product; a count that is not 4 L + 1 products is not attributed (None), and a
# launch order with one product missing (the planted control) is refused rather than shifted.

import importlib.util
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("profile_encode", ROOT / "bench" / "profile_encode.py")
profile_encode = importlib.util.module_from_spec(spec)
spec.loader.exec_module(profile_encode)


def block(layer):
    """One block's launches as forward.c runs them in E4M3, each product's time naming its role and layer."""
    return [("rmsnorm_forward_kernel<16>", 1.0), ("nvjet_sm90_qqtst_192x192", 1000.0 + layer), ("rope_kernel", 1.0),
            ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma", 5.0), ("quantize_e4m3_fixed_kernel", 1.0),
            ("nvjet_sm90_qqsss_128x256", 2000.0 + layer), ("rmsnorm_forward_kernel<16>", 1.0),
            ("nvjet_sm90_qqtst_192x192", 3000.0 + layer), ("swiglu_e4m3_fixed_kernel", 1.0),
            ("nvjet_sm90_qqsss_128x256", 4000.0 + layer)]


def call(depth):
    launches = [("embed_forward_kernel", 1.0)]
    for layer in range(depth):
        launches += block(layer)
    return launches + [("pool_forward_kernel", 1.0), ("nvjet_sm90_tss_256x128", 0.5)]


def test_products_are_attributed_by_their_place_in_the_block():
    depth = 12
    products = profile_encode.by_product(call(depth))
    offsets = sum(range(depth)) / 1e3
    assert products == {"qkv": 12 + offsets, "out": 24 + offsets, "gate_up": 36 + offsets, "down": 48 + offsets}


def test_a_call_whose_products_do_not_fit_four_a_block_is_not_attributed():
    launches = call(3)
    del launches[2]  # the first block's qkv product gone: every later product would shift a role
    assert profile_encode.by_product(launches) is None
    assert profile_encode.by_product([("rmsnorm_forward_kernel<16>", 1.0)]) is None


def test_by_name_sums_launches():
    totals = profile_encode.by_name(call(2))
    assert totals["nvjet_sm90_qqtst_192x192"] == [1000.0 + 1001.0 + 3000.0 + 3001.0, 4]
    assert totals["embed_forward_kernel"] == [1.0, 1]
