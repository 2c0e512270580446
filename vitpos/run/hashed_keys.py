"""The keys the run hash covered when its rule was frozen (2026-12-06), from every config file and
committed run; never edited. A key added since counts as :func:`vitpos.run.identity.counts` says (an
encoding option unless at its ``__init__`` default; another key unless null or at a value its schema
``as_before`` names), so adding a key at a default that reproduces what ran before keeps every run folder.
"""


def _keys(text: str) -> frozenset[str]:
    return frozenset(text.split())


#: per config section (``encoding``: per encoding, below)
SECTION_KEYS = {
    "model": _keys(
        "causal checkpoint depth dim drop_path dropout embed_std kwargs mlp_ratio name num_heads "
        "patch_size pool zero_token_embeddings"
    ),
    "data": _keys(
        "anchor augment augment_magnitude augment_ops batch_size cell crop_padding format hflip "
        "img_size min_len name num_classes num_length_test num_test num_train num_val offset "
        "probe_classes seed split_seed task test_subset train_len train_subset val_size vocab_size"
    ),
    "optim": _keys("betas lr min_lr_ratio warmup_epochs weight_decay"),
    "task": _keys("cutmix ema_decay ema_warmup label_smoothing mixup name"),
    "trainer": _keys("check_val_every_n_epoch deterministic gradient_clip_val max_epochs precision"),
}
_SEQUENCE = _keys(
    "anchor batch_size min_len name num_length_test num_test num_train num_val offset probe_classes seed task "
    "train_len vocab_size"
)
#: per data set: which of the ``data`` keys above its config file held (a key it gained since counts only when set)
DATA_SET_KEYS = {
    "cifar10": _keys(
        "augment augment_magnitude augment_ops batch_size crop_padding format hflip img_size name num_classes "
        "split_seed test_subset train_subset val_size"
    ),
    "shapes": _keys(
        "augment augment_magnitude augment_ops batch_size cell crop_padding hflip img_size name num_classes "
        "num_test num_train split_seed val_size"
    ),
    "seq_copy": _SEQUENCE,
    "seq_reverse": _SEQUENCE,
    "seq_probe": _SEQUENCE,
}
#: per encoding name: the options its config file or a committed run held
ENCODING_KEYS = {
    "alibi": _keys("name strategy"),
    "alibi_2d": _keys("name strategy"),
    "combo": _keys("name options parts"),
    "comrope": _keys("block_size cls_position init_std name strategy variant"),
    "cpe": _keys("blocks kernel_size name"),
    "fire_2d": _keys("init_c init_threshold mlp_width name shared strategy"),
    "learned_1d": _keys("antialias name strategy"),
    "learned_2d": _keys("antialias name strategy"),
    "learned_2d_sum": _keys("antialias name resample strategy"),
    "liere": _keys("block_size init_range name strategy"),
    "lookhere": _keys("fov free_heads global_slope layer_slopes name strategy"),
    "none": _keys("name"),
    "pape": _keys("align cls_position name parabolas strategy"),
    "pape_ri": _keys("align cls_position name strategy"),
    "rel_bias_1d": _keys("bidirectional init_std max_distance name num_buckets shared strategy"),
    "rel_bias_2d": _keys("name shared strategy"),
    "rope_1d": _keys("align base layout name scale strategy yarn_ramp"),
    "rope_1d_learned": _keys("align base layout name strategy"),
    "rope_2d": _keys("align base name scale strategy yarn_ramp"),
    "rope_2d_dinov3": _keys(
        "base jitter_coords max_period min_period name normalize_coords rescale_coords shift_coords strategy"
    ),
    "rope_2d_mixed": _keys("align base name strategy"),
    "sincos_1d": _keys("align name strategy temperature"),
    "sincos_2d": _keys("align name strategy temperature"),
    "string_cayley": _keys("align base beta_fast beta_slow layout name scale strategy yarn_ramp"),
    "string_circulant": _keys("align base init name strategy"),
}
