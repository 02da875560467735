"""What PyTorch's functions and methods do to devices: the tables the device analysis reads.

Names are qualified (`torch.ones`) for functions and bare (`add_`) for tensor methods.
Everything here is copied statically; devlint never imports torch.
"""

from __future__ import annotations

# Device types: the accelerators (one backend each), then all that torch.device accepts.
ACCELERATOR_TYPES = ("cuda", "mps", "xpu", "npu", "hpu")
DEVICE_TYPES = frozenset({"cpu", "meta", *ACCELERATOR_TYPES})
# Accelerator literals that name their backend's current device (no index, or index 0).
PORTABLE_LITERALS = frozenset({*ACCELERATOR_TYPES, *(f"{kind}:0" for kind in ACCELERATOR_TYPES)})

# torch.utils._device._device_constructors(): the factories that honour `device=` and the
# default device. Without either they build on the CPU.
FACTORIES = frozenset(
    {
        "torch.empty", "torch.empty_permuted", "torch.empty_strided", "torch.empty_quantized",
        "torch.ones", "torch.arange", "torch.bartlett_window", "torch.blackman_window",
        "torch.eye", "torch.fft.fftfreq", "torch.fft.rfftfreq", "torch.full", "torch.fill",
        "torch.hamming_window", "torch.hann_window", "torch.kaiser_window", "torch.linspace",
        "torch.logspace", "torch.nested.nested_tensor", "torch.rand", "torch.randn",
        "torch.randint", "torch.randperm", "torch.range", "torch.sparse_coo_tensor",
        "torch.sparse_compressed_tensor", "torch.sparse_csr_tensor", "torch.sparse_csc_tensor",
        "torch.sparse_bsr_tensor", "torch.sparse_bsc_tensor", "torch.tril_indices",
        "torch.triu_indices", "torch.vander", "torch.zeros", "torch.asarray", "torch.tensor",
        "torch.as_tensor", "torch.scalar_tensor",
    }
)  # fmt: skip

# Factories that build on their tensor argument's device (`torch.vander(x)`, `torch.fill(x, v)`).
TENSOR_ARGUMENT_FACTORIES = frozenset({"torch.vander", "torch.fill"})
# Sparse constructors: without `device=` they build where their values are (the argument at
# this position), the indices following.
SPARSE_VALUES_POSITION = {
    "torch.sparse_coo_tensor": 1, "torch.sparse_csr_tensor": 2, "torch.sparse_csc_tensor": 2,
    "torch.sparse_bsr_tensor": 2, "torch.sparse_bsc_tensor": 2, "torch.sparse_compressed_tensor": 2,
}  # fmt: skip
# Factories a fix may give `device=`.
DEVICE_FACTORIES = FACTORIES - TENSOR_ARGUMENT_FACTORIES

# Factories whose first argument is data (its device, when it is a tensor, is kept).
DATA_FACTORIES = frozenset({"torch.tensor", "torch.as_tensor", "torch.asarray"})

# Factories that take a tensor and build on its device.
LIKE_FACTORIES = frozenset(
    {
        "torch.zeros_like", "torch.ones_like", "torch.empty_like", "torch.full_like",
        "torch.rand_like", "torch.randn_like", "torch.randint_like",
    }
)  # fmt: skip

# Factories that always give a 1-d or larger tensor, whatever their arguments.
NONZERO_DIM_FACTORIES = frozenset(
    {
        "torch.arange", "torch.range", "torch.linspace", "torch.logspace", "torch.randperm",
        "torch.eye", "torch.tril_indices", "torch.triu_indices", "torch.bartlett_window",
        "torch.blackman_window", "torch.hamming_window", "torch.hann_window",
        "torch.kaiser_window", "torch.fft.fftfreq", "torch.fft.rfftfreq",
    }
)  # fmt: skip

LEGACY_CPU_TYPES = frozenset(
    f"torch.{kind}Tensor"
    for kind in ("", "Float", "Double", "Half", "BFloat16", "Byte", "Char", "Short", "Int", "Long", "Bool")
)
LEGACY_CUDA_TYPES = frozenset(
    f"torch.cuda.{kind}Tensor"
    for kind in ("Float", "Double", "Half", "BFloat16", "Byte", "Char", "Short", "Int", "Long", "Bool")
)

CPU_SOURCES = frozenset({"torch.from_numpy", "torch.frombuffer"})
# torchvision transforms that make a (CPU) tensor of a picture or array
TENSOR_MAKING_TRANSFORMS = frozenset({"ToTensor", "PILToTensor", "ToImage", "ToImageTensor"})

DTYPES = frozenset(
    f"torch.{name}"
    for name in (
        "float", "float16", "float32", "float64", "half", "double", "bfloat16", "int", "int8",
        "int16", "int32", "int64", "long", "short", "uint8", "bool", "complex64", "complex128",
        "cfloat", "cdouble", "float8_e4m3fn", "float8_e5m2", "uint16", "uint32", "uint64",
    )
)  # fmt: skip

# torch.* callables that do not return a tensor.
NON_TENSOR_FUNCTIONS = frozenset(
    {
        "torch.device", "torch.Size", "torch.finfo", "torch.iinfo", "torch.is_tensor",
        "torch.is_floating_point", "torch.is_complex", "torch.is_storage", "torch.numel",
        "torch.save", "torch.load", "torch.manual_seed", "torch.seed", "torch.initial_seed",
        "torch.no_grad", "torch.enable_grad", "torch.inference_mode", "torch.autocast",
        "torch.set_grad_enabled", "torch.compile", "torch.typename", "torch.equal",
        "torch.allclose", "torch.is_grad_enabled", "torch.is_nonzero", "torch.Generator",
        "torch.get_default_dtype", "torch.broadcast_shapes",
    }
)  # fmt: skip

# Layers that return `(output, hidden)`; an LSTM's hidden is `(h, c)`.
RECURRENT_LAYERS = frozenset({"torch.nn.RNN", "torch.nn.LSTM", "torch.nn.GRU"})

# `Variable(t)` is `t` since torch 0.4.
VARIABLE_WRAPPERS = frozenset({"torch.autograd.Variable", "torch.autograd.variable.Variable"})

# Namespaces whose lowercase callables are tensor operations.
OP_NAMESPACES = ("torch.", "torch.nn.functional.", "torch.linalg.", "torch.fft.", "torch.special.")
NOT_OP_NAMESPACES = (
    "torch.cuda.", "torch.backends.", "torch.distributed.", "torch.utils.", "torch.jit.",
    "torch.onnx.", "torch.testing.", "torch.autograd.", "torch.accelerator.", "torch.hub.",
    "torch.mps.", "torch.xpu.", "torch.npu.", "torch.amp.", "torch.nn.init.", "torch.nn.utils.",
    "torch.optim.", "torch.library.", "torch.fx.", "torch.export.", "torch.compiler.",
    "torch.multiprocessing.", "torch.overrides.", "torch._",
)  # fmt: skip

# torch.* operations whose tensor inputs must share a device (a 0-dim CPU tensor excepted).
SAME_DEVICE_FUNCTIONS = frozenset(
    "torch." + name
    for name in (
        "cat", "concat", "concatenate", "stack", "hstack", "vstack", "dstack", "column_stack",
        "row_stack", "where", "add", "sub", "subtract", "mul", "multiply", "div", "divide",
        "true_divide", "floor_divide", "remainder", "fmod", "pow", "atan2", "arctan2", "maximum",
        "minimum", "fmax", "fmin", "eq", "ne", "lt", "le", "gt", "ge", "greater", "less",
        "greater_equal", "less_equal", "not_equal", "logical_and", "logical_or", "logical_xor",
        "bitwise_and", "bitwise_or", "bitwise_xor", "matmul", "mm", "bmm", "mv", "dot", "vdot",
        "outer", "ger", "inner", "einsum", "tensordot", "kron", "cross", "cdist", "dist", "lerp",
        "addcmul", "addcdiv", "addmm", "addbmm", "baddbmm", "addmv", "masked_fill",
        "masked_select", "gather", "index_select", "take_along_dim", "bucketize",
        "searchsorted", "cosine_similarity", "pairwise_distance", "hypot", "copysign", "xlogy",
        "meshgrid", "block_diag", "cartesian_prod", "polar", "complex", "heaviside",
        "nextafter", "ldexp", "linalg.solve", "linalg.lstsq", "linalg.vecdot", "linalg.cross",
        "linalg.matmul", "linalg.multi_dot",
        "nn.functional.linear", "nn.functional.bilinear", "nn.functional.conv1d",
        "nn.functional.conv2d", "nn.functional.conv3d", "nn.functional.conv_transpose1d",
        "nn.functional.conv_transpose2d", "nn.functional.conv_transpose3d",
        "nn.functional.embedding", "nn.functional.grid_sample", "nn.functional.cross_entropy",
        "nn.functional.nll_loss", "nn.functional.mse_loss", "nn.functional.l1_loss",
        "nn.functional.smooth_l1_loss", "nn.functional.huber_loss",
        "nn.functional.binary_cross_entropy", "nn.functional.binary_cross_entropy_with_logits",
        "nn.functional.kl_div", "nn.functional.cosine_similarity",
        "nn.functional.pairwise_distance", "nn.functional.triplet_margin_loss",
        "nn.functional.margin_ranking_loss", "nn.functional.cosine_embedding_loss",
        "nn.functional.layer_norm", "nn.functional.group_norm", "nn.functional.prelu",
        "nn.functional.scaled_dot_product_attention", "stft", "istft",
    )
)  # fmt: skip

# torch.* reductions that give a 0-dim tensor when given only the tensor.
REDUCTIONS = frozenset(
    {
        "sum", "mean", "max", "min", "prod", "norm", "std", "var", "all", "any", "amax", "amin",
        "median", "nansum", "nanmean", "argmax", "argmin", "count_nonzero", "trace", "dot",
        "vdot", "det", "logdet",
    }
)  # fmt: skip

# -- tensor methods --------------------------------------------------------------------

# Elementwise methods taking other tensors: inputs must share the device, except a 0-dim
# CPU tensor; the in-place `_` forms also require the receiver (the output) to match.
ELEMENTWISE_METHODS = frozenset(
    {
        "add", "sub", "subtract", "mul", "multiply", "div", "divide", "true_divide",
        "floor_divide", "remainder", "fmod", "pow", "atan2", "arctan2", "maximum", "minimum",
        "fmax", "fmin", "eq", "ne", "lt", "le", "gt", "ge", "greater", "less", "logical_and",
        "logical_or", "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor", "lerp",
        "addcmul", "addcdiv", "hypot", "copysign", "xlogy", "masked_fill", "where", "clamp",
        "clip", "rsub", "mul_", "add_", "sub_", "div_", "pow_", "lerp_",
        "masked_fill_", "addcmul_", "addcdiv_", "clamp_", "maximum_", "minimum_", "fmod_",
        "remainder_", "floor_divide_", "true_divide_", "logical_and_", "logical_or_",
        "bitwise_and_", "bitwise_or_", "eq_", "ne_", "lt_", "le_", "gt_", "ge_",
    }
)  # fmt: skip

# Non-elementwise methods whose tensor arguments must share the receiver's device.
SAME_DEVICE_METHODS = frozenset(
    {
        "matmul", "mm", "bmm", "mv", "dot", "vdot", "outer", "ger", "inner", "cross", "gather",
        "index_select", "masked_select", "take_along_dim", "addmm", "baddbmm", "addmv",
        "masked_scatter", "masked_scatter_", "scatter", "scatter_", "scatter_add",
        "scatter_add_", "index_add", "index_add_",
    }
)  # fmt: skip

# Methods returning a tensor on the receiver's device.
TENSOR_METHODS = frozenset(
    {
        *ELEMENTWISE_METHODS, *SAME_DEVICE_METHODS, *REDUCTIONS, "abs", "abs_", "neg", "exp",
        "exp_", "log", "log_", "log2", "log10", "log1p", "expm1", "sqrt", "sqrt_", "rsqrt",
        "sin", "cos", "tan", "tanh", "tanh_", "sigmoid_", "relu", "relu_", "floor", "ceil",
        "round", "trunc", "frac", "sign", "reciprocal", "square", "erf", "erfinv", "logit",
        "softmax", "log_softmax", "cumsum", "cumprod", "cummax", "cummin", "logsumexp",
        "view", "view_as", "reshape", "reshape_as", "permute", "transpose", "transpose_", "t",
        "contiguous", "float", "half", "double", "bfloat16", "long", "int", "short", "bool",
        "byte", "char", "clone", "detach", "detach_", "unsqueeze", "unsqueeze_", "squeeze",
        "squeeze_", "flatten", "unflatten", "expand", "expand_as", "repeat",
        "repeat_interleave", "flip", "fliplr", "flipud", "roll", "rot90", "narrow", "select",
        "index_fill", "index_fill_", "masked_fill", "fill_", "zero_", "normal_", "uniform_",
        "random_", "bernoulli", "bernoulli_", "exponential_", "copy_", "requires_grad_",
        "topk", "sort", "argsort", "chunk", "split", "unbind", "nonzero", "tril", "triu",
        "diag", "diagonal", "diag_embed", "norm", "renorm", "matrix_power", "inverse",
        "pinverse", "mean", "sum", "unfold", "movedim", "moveaxis", "swapaxes", "swapdims",
        "type_as", "new_zeros", "new_ones", "new_empty", "new_full", "new_tensor",
        "masked_fill", "nan_to_num", "isnan", "isinf", "isfinite", "logical_not",
        "bitwise_not", "argwhere", "unique", "cpu", "cuda", "to", "pin_memory", "conj",
        "angle", "real", "imag", "sigmoid", "clamp_min", "clamp_max", "sub", "pow", "exp2",
        "atan", "asin", "acos", "sinh", "cosh", "softplus", "gelu", "silu", "mish", "hardtanh",
        "float_power", "addmm_", "add_", "div_", "mul_", "sub_", "square_", "neg_", "std",
        "var", "prod", "cumsum_", "index_put", "index_put_", "put_", "index_copy",
        "index_copy_", "scatter_reduce", "as_strided",
        "tile", "positive", "negative",
    }
)  # fmt: skip

# Methods that never return a tensor (or return something living on the host).
NON_TENSOR_METHODS = frozenset(
    {
        "item", "tolist", "numpy", "size", "dim", "ndimension", "numel", "nelement",
        "element_size", "data_ptr", "is_contiguous", "stride", "get_device", "__len__",
        "is_floating_point", "is_complex", "equal", "allclose", "storage", "untyped_storage",
        "backward", "register_hook", "dim_order", "is_pinned", "is_shared", "is_set_to",
        "storage_offset", "type", "__array__", "tobytes", "is_signed", "is_inference",
        "has_names", "retain_grad",
    }
)  # fmt: skip

# Tensor attributes that are tensors on the tensor's own device, and ones that are not.
TENSOR_ATTRS = frozenset({"T", "mT", "H", "mH", "data", "grad", "real", "imag"})
# attributes only a tensor has that are tensors: a model's output is a tensor where the code reads them
TENSOR_VIEW_ATTRS = frozenset({"T", "mT", "H", "mH", "data"})
NON_TENSOR_ATTRS = frozenset(
    {
        "shape", "dtype", "ndim", "is_cuda", "is_cpu", "is_mps", "is_xpu", "requires_grad",
        "layout", "names", "is_leaf", "itemsize", "nbytes", "is_sparse", "is_quantized",
        "is_meta", "grad_fn", "output_nr", "_version",
    }
)  # fmt: skip

# -- modules ---------------------------------------------------------------------------

# torch.nn layers that hold parameters or buffers (constructed on the CPU).
PARAMETER_LAYERS = frozenset(
    "torch.nn." + name
    for name in (
        "Linear", "Bilinear", "LazyLinear", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d",
        "ConvTranspose2d", "ConvTranspose3d", "LazyConv1d", "LazyConv2d", "LazyConv3d",
        "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "SyncBatchNorm", "LayerNorm", "GroupNorm",
        "RMSNorm", "LocalResponseNorm", "Embedding", "EmbeddingBag", "RNN", "LSTM", "GRU",
        "RNNCell", "LSTMCell", "GRUCell", "MultiheadAttention", "Transformer",
        "TransformerEncoder", "TransformerDecoder", "TransformerEncoderLayer",
        "TransformerDecoderLayer", "PReLU",
    )
)  # fmt: skip

# torch.nn classes that hold neither parameters nor buffers: functions of their inputs,
# which need those inputs on one device.
PARAMETERLESS_LAYERS = frozenset(
    "torch.nn." + name
    for name in (
        "ReLU", "ReLU6", "LeakyReLU", "ELU", "SELU", "CELU", "GELU", "SiLU", "Mish", "Sigmoid",
        "Tanh", "Hardtanh", "Hardsigmoid", "Hardswish", "Hardshrink", "Softshrink",
        "Tanhshrink", "Softplus", "Softsign", "LogSigmoid", "Threshold", "GLU", "Softmax",
        "Softmax2d", "LogSoftmax", "Softmin", "Dropout", "Dropout1d", "Dropout2d", "Dropout3d",
        "AlphaDropout", "FeatureAlphaDropout", "Identity", "Flatten", "Unflatten",
        "MaxPool1d", "MaxPool2d", "MaxPool3d", "AvgPool1d", "AvgPool2d", "AvgPool3d",
        "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AdaptiveMaxPool3d", "AdaptiveAvgPool1d",
        "AdaptiveAvgPool2d", "AdaptiveAvgPool3d", "LPPool1d", "LPPool2d", "FractionalMaxPool2d",
        "MaxUnpool1d", "MaxUnpool2d", "MaxUnpool3d", "Upsample", "UpsamplingNearest2d",
        "UpsamplingBilinear2d", "PixelShuffle", "PixelUnshuffle", "ChannelShuffle", "Fold",
        "Unfold", "ZeroPad1d", "ZeroPad2d", "ZeroPad3d", "ConstantPad1d", "ConstantPad2d",
        "ConstantPad3d", "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d",
        "ReplicationPad1d", "ReplicationPad2d", "ReplicationPad3d", "CircularPad1d",
        "CircularPad2d", "CircularPad3d", "CosineSimilarity", "PairwiseDistance",
        "MSELoss", "L1Loss", "SmoothL1Loss", "HuberLoss", "KLDivLoss", "PoissonNLLLoss",
        "GaussianNLLLoss", "HingeEmbeddingLoss", "CosineEmbeddingLoss", "MarginRankingLoss",
        "TripletMarginLoss", "TripletMarginWithDistanceLoss", "SoftMarginLoss", "CTCLoss",
        "MultiLabelMarginLoss",
    )
)  # fmt: skip

# torch.nn normalisations that hold parameters or buffers only when asked to.
OPTIONAL_STATE_LAYERS = {
    "torch.nn." + name: ("affine", "track_running_stats")
    for name in ("InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d")
}

# Wrappers that hold the module they are given, on its device.
MODULE_WRAPPERS = frozenset(
    {
        "torch.nn.DataParallel", "torch.nn.parallel.DataParallel",
        "torch.nn.parallel.DistributedDataParallel", "torch.nn.parallel.data_parallel.DataParallel",
        "torch.nn.parallel.distributed.DistributedDataParallel",
    }
)  # fmt: skip

# Wrappers that scatter (move) their inputs to the devices they run on: a CPU batch is
# fine. DistributedDataParallel does it when given `device_ids`.
INPUT_MOVING_WRAPPERS = frozenset({"torch.nn.DataParallel", "torch.nn.parallel.DataParallel",
                                   "torch.nn.parallel.data_parallel.DataParallel"})  # fmt: skip
DDP_WRAPPERS = MODULE_WRAPPERS - INPUT_MOVING_WRAPPERS
MOVES_INPUTS = "moves-inputs"  # the `layer` of a wrapper that moves its inputs (DataParallel)
# after a join (see the lattice): such a wrapper on some paths, and on some a module on the
# accelerator that does not move its inputs (a CPU batch fails there) ...
MAY_MOVE_INPUTS = "may-move-inputs"
# ... or one on every path where the module is on the accelerator (the others are on the CPU)
MOVES_INPUTS_WHEN_MOVED = "moves-inputs-when-moved"

# `FloatTensor`, `LongTensor`, ...: the names of the legacy tensor types (CPU or CUDA).
LEGACY_TYPE_NAMES = frozenset(name.rsplit(".", 1)[-1] for name in (*LEGACY_CPU_TYPES, *LEGACY_CUDA_TYPES)) - {"Tensor"}

AUDIO_TRANSFORM = "torchaudio.transforms"  # the `layer` of a torchaudio transform
# torchaudio transforms holding buffers (windows, filter banks, kernels): the others hold nothing.
AUDIO_TRANSFORMS_WITH_BUFFERS = frozenset(
    {"Spectrogram", "InverseSpectrogram", "MelSpectrogram", "MelScale", "InverseMelScale", "MFCC", "LFCC",
     "Resample", "GriffinLim", "SpectralCentroid", "PitchShift"}
)  # fmt: skip
TENSOR_DATASETS = frozenset({"torch.utils.data.TensorDataset", "torch.utils.data.dataset.TensorDataset"})
RANDOM_SPLITS = frozenset({"torch.utils.data.random_split", "torch.utils.data.dataset.random_split"})

# torch.nn modules whose tensor inputs need not share a device: CTCLoss takes its lengths
# on the CPU.
MIXED_INPUT_LAYERS = frozenset({"torch.nn.CTCLoss"})

# torch.nn losses that hold a buffer when given `weight=` / `pos_weight=`.
WEIGHTED_LOSSES = frozenset(
    "torch.nn." + name
    for name in (
        "CrossEntropyLoss", "NLLLoss", "BCELoss", "BCEWithLogitsLoss", "MultiLabelSoftMarginLoss",
        "MultiMarginLoss",
    )
)  # fmt: skip

# Containers that hold whatever modules they are given.
MODULE_CONTAINERS = frozenset({"torch.nn.Sequential", "torch.nn.ModuleList", "torch.nn.ModuleDict"})

# Base classes that make a class an nn.Module (besides anything else under torch.nn).
MODULE_BASES = frozenset(
    {
        "torch.nn.Module", "pytorch_lightning.LightningModule", "lightning.LightningModule",
        "lightning.pytorch.LightningModule", "pytorch_lightning.core.LightningModule",
        "lightning.pytorch.core.LightningModule",
    }
)  # fmt: skip

# Module methods that return the module itself (`.to` and friends move it in place).
# Methods only a module has (an optimizer's `load_state_dict` aside, which is never moved
# nor called with a tensor): a value of unknown kind they are called on is a module.
# Words in the names of model classes (`GPTModel`, `ResNet`, `TransformerEncoder`): an
# imported class so named, built and then moved by a statement of its own, is a model.
MODEL_CLASS_WORDS = (
    "Model", "Net", "Encoder", "Decoder", "Transformer", "GPT", "Bert", "BERT", "LSTM", "GRU", "RNN", "CNN",
    "MLP", "Classifier", "Discriminator", "Autoencoder", "VAE", "UNet", "Unet",
)  # fmt: skip

MODULE_EVIDENCE = frozenset(
    {"eval", "load_state_dict", "parameters", "named_parameters", "named_modules", "modules", "children"}
)

MODULE_SELF_METHODS = frozenset(
    {
        "half", "float", "double", "bfloat16", "train", "eval", "requires_grad_", "apply",
        "share_memory", "type", "zero_grad",
    }
)  # fmt: skip
MOVE_METHODS = frozenset({"to", "cuda", "cpu", "xpu", "mps", "npu", "to_empty"})
# methods of a model that run it on the tensors they are given (Hugging Face, minGPT)
MODEL_INPUT_METHODS = frozenset({"generate"})
# Calls that turn their (positional) arguments into NumPy arrays.
CONVERTING_NAMESPACES = ("numpy.", "matplotlib.pyplot.", "sklearn.metrics.", "scipy.")
# Methods of a matplotlib `Axes` that convert their data arguments with `np.asarray`
# (`ax.imshow(t)`, `axes[0, 1].plot(x, y)`).
AXES_PLOTTING_METHODS = frozenset(
    {
        "bar", "barh", "boxplot", "contour", "contourf", "errorbar", "fill_between", "hexbin",
        "hist", "hist2d", "imshow", "loglog", "matshow", "pcolor", "pcolormesh", "pie", "plot",
        "quiver", "scatter", "semilogx", "semilogy", "specgram", "stairs", "stem", "step",
        "violinplot",
    }
)  # fmt: skip

# `clip_grad_norm_` returns the total norm: a 0-dim tensor where the parameters are.
GRAD_NORM_FUNCTIONS = frozenset(
    {"torch.nn.utils.clip_grad_norm_", "torch.nn.utils.clip_grad.clip_grad_norm_", "torch.nn.utils.clip_grad_norm"}
)

# Calls that run the model they are given on the example inputs given after it.
TRACING_FUNCTIONS = frozenset({"torch.jit.trace", "torch.onnx.export"})
# functions that give back the module they are handed, compiled, where it is
COMPILING_FUNCTIONS = frozenset(
    {"torch.compile", "torch.jit.script", "torch.jit.freeze", "torch.jit.optimize_for_inference"}
)
SHARING_COMPILERS = frozenset({"torch.compile", "torch.jit.script"})
TRACING_METHODS = frozenset({"add_graph"})  # SummaryWriter.add_graph(model, input_to_model)
# Keyword arguments that are a model's input wherever the model is from (Hugging Face names).
MODEL_INPUT_KEYWORDS = frozenset({"input_ids", "pixel_values", "input_values", "input_features", "inputs_embeds"})

DATALOADERS = frozenset({"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"})

# Packages whose constructors build a model with parameters, on the CPU (unless given
# a `device_map=`), and whose classes are modules.
MODEL_FACTORIES = ("torchvision.models.", "timm.create_model", "transformers.AutoModel")


def is_hf_trainer(qualified: str) -> bool:
    """A Hugging Face trainer (`transformers.Trainer`, `Seq2SeqTrainer`, trl's `SFTTrainer`),
    which moves the model it is given to the accelerator when it is built."""
    return qualified.startswith(("transformers.", "trl.")) and qualified.endswith("Trainer")


MODEL_CLASS_PACKAGES = ("torchvision.models.",)


def is_library_model_class(qualified: str) -> bool:
    """`transformers.PreTrainedModel`, `transformers.models.roberta.modeling_roberta
    .RobertaPreTrainedModel`, `transformers.BertModel`, `diffusers.ModelMixin`: classes
    of model libraries that are `nn.Module`s (a class deriving from one is a module)."""
    if qualified.startswith("diffusers."):
        return qualified.rsplit(".", 1)[-1] == "ModelMixin"
    if not qualified.startswith("transformers."):
        return False
    name = qualified.rsplit(".", 1)[-1]
    if name.startswith(("TF", "Flax")) or any(part in name for part in _NOT_MODEL_PARTS):
        return False  # TensorFlow and Flax models, collators, pipelines, configurations...
    return name.endswith("Model") or "For" in name


_NOT_MODEL_PARTS = ("Tokenizer", "Config", "Processor", "FeatureExtractor", "Output", "Mixin", "Collator",
                    "Pipeline", "Trainer", "Callback", "Arguments", "Dataset")  # fmt: skip


def is_pretrained_model(qualified: str) -> bool:
    """`transformers.BertModel.from_pretrained`, `transformers.T5ForConditionalGeneration
    .from_pretrained`: a Hugging Face model class loading weights (not a tokenizer,
    configuration or processor, whose names say so)."""
    if not qualified.startswith("transformers.") or not qualified.endswith(".from_pretrained"):
        return False
    name = qualified[len("transformers.") : -len(".from_pretrained")].rsplit(".", 1)[-1]
    if name.startswith(("TF", "Flax")) or any(part in name for part in _NOT_MODEL_PARTS):
        return False
    return "Model" in name or "For" in name


# Optimizer classes: torch.optim.<Upper>, not the schedulers below it.
OPTIMIZER_NAMESPACE = "torch.optim."

# Random factories: the accelerator's generator draws other numbers than the CPU's.
RANDOM_FACTORIES = frozenset(
    {"torch.rand", "torch.randn", "torch.randint", "torch.randperm", "torch.normal", "torch.bernoulli"}
)

# Tensor methods that copy to the host and wait for the accelerator.
SYNC_METHODS = frozenset({"item", "cpu", "tolist", "numpy"})
SYNC_BUILTINS = frozenset({"float", "int", "bool", "print"})

# Wrappers that iterate like their first argument.
ITERATION_WRAPPERS = frozenset({"iter", "tqdm", "tqdm.tqdm", "tqdm.auto.tqdm", "tqdm.notebook.tqdm"})

# What a parameter is used as, in a module method, that makes it a tensor.
TENSOR_USE_ATTRS = frozenset(
    {
        "shape", "device", "ndim", "size", "dim", "view", "reshape", "permute", "transpose",
        "unsqueeze", "flatten", "contiguous", "is_cuda",
    }
)  # fmt: skip

# Names that, passed as `.to(name)`, are devices rather than dtypes.
# Attributes only tensors have (not modules, not NumPy arrays): a parameter that reads
# one is a tensor.
# Methods only a tensor has (not a module, a list, nor a NumPy array, whose `squeeze` and
# `size` attribute look alike), and an attribute only a tensor has.
TENSOR_ONLY_METHODS = frozenset(
    {"size", "dim", "ndimension", "unsqueeze", "permute", "contiguous", "numel", "detach", "element_size",
     "new_zeros", "new_ones", "new_empty", "new_full",
     # casts a module does not have (it has `float`, `half`, `double`), nor a NumPy array
     "long", "int", "byte", "short", "char"}
)  # fmt: skip
TENSOR_ONLY_ATTRS = frozenset({"is_cuda"})
# torch functions that return several tensors (or none), not one.
SEVERAL_TENSORS = frozenset(
    {"split", "chunk", "unbind", "tensor_split", "hsplit", "vsplit", "dsplit", "meshgrid", "broadcast_tensors",
     "sort", "topk", "max", "min", "median", "mode", "kthvalue", "aminmax", "var_mean", "std_mean", "unique",
     "unique_consecutive", "histogram", "lstsq", "qr", "svd", "eig", "eigh", "slogdet", "lu", "frexp", "where",
     "nonzero", "save", "manual_seed", "no_grad", "is_tensor", "numel", "is_floating_point", "Size", "device",
     "Generator", "from_numpy"}
)  # fmt: skip
# torch modules whose functions return other things than one tensor (sequences packed
# with their CPU lengths, distributions, optimisers, ...).
NOT_TENSOR_MODULES = (
    "torch.nn.utils.", "torch.distributions.", "torch.utils.", "torch.optim.", "torch.cuda.", "torch.backends.",
    "torch.jit.", "torch.onnx.", "torch.autograd.", "torch.distributed.", "torch.accelerator.",
)  # fmt: skip

# Methods and properties of a `torch.distributions` object that give tensors where its
# parameters are (`Categorical(logits=out).sample()`).
DISTRIBUTION_METHODS = frozenset(
    {"sample", "rsample", "sample_n", "log_prob", "entropy", "cdf", "icdf", "enumerate_support", "perplexity"}
)
DISTRIBUTION_ATTRS = frozenset(
    {"mean", "mode", "stddev", "variance", "probs", "logits", "loc", "scale", "concentration", "rate",
     "covariance_matrix", "scale_tril", "precision_matrix", "low", "high", "df", "total_count"}
)  # fmt: skip

# albumentations: its pipeline, and the step that makes CPU tensors of the arrays.
ALBUMENTATIONS_COMPOSE = frozenset({"albumentations.Compose", "albumentations.core.composition.Compose"})
ALBUMENTATIONS_TO_TENSOR = frozenset(
    {"albumentations.pytorch.ToTensorV2", "albumentations.pytorch.transforms.ToTensorV2",
     "albumentations.pytorch.transforms.ToTensor", "albumentations.pytorch.ToTensor"}
)  # fmt: skip

# Operations that join a sequence of tensors into one.
JOINING_OPS = frozenset({"cat", "concat", "concatenate", "stack"})

DEVICE_LIKE_NAMES = frozenset({"dev", "rank", "local_rank", "gpu", "gpu_id", "device_id"})

# Builtins whose result is never a tensor, module or device.
BUILTINS_OTHER = frozenset(
    {
        "len", "int", "float", "bool", "str", "range", "isinstance", "issubclass", "print",
        "list", "tuple", "dict", "set", "sorted", "enumerate", "zip", "hasattr", "repr",
        "format", "type", "id", "hash", "callable", "open", "reversed", "map", "filter",
        "any", "all", "super", "vars", "dir", "divmod", "round", "chr", "ord", "frozenset",
    }
)  # fmt: skip

# Tensor methods whose result keeps the receiver's shape.
SHAPE_KEEPING = frozenset(
    {
        "float", "half", "double", "bfloat16", "long", "int", "short", "bool", "byte", "char",
        "clone", "detach", "detach_", "contiguous", "abs", "neg", "exp", "log", "sqrt", "rsqrt",
        "sigmoid", "tanh", "relu", "floor", "ceil", "round", "trunc", "sign", "reciprocal",
        "square", "erf", "requires_grad_", "pin_memory", "fill_", "zero_", "normal_",
        "uniform_", "copy_", "softmax", "log_softmax", "cumsum", "nan_to_num", "logical_not",
        "isnan", "isinf", "isfinite", "clamp_min", "clamp_max", "exp_", "log_", "abs_",
        "triu", "tril", "flip", "roll", "masked_fill", "clamp", "clip",
    }
)  # fmt: skip

# Tensor methods whose result has at least one dimension: always (`unsqueeze`, `flatten`),
# or whenever they are given sizes or dimensions (`view(b, -1)`, `expand(n, d)`).
AT_LEAST_ONE_DIM = frozenset({"unsqueeze", "flatten", "atleast_1d", "atleast_2d", "atleast_3d"})
SIZED_VIEWS = frozenset({"view", "reshape", "expand", "repeat", "permute", "tile", "broadcast_to", "new_ones",
                         "new_zeros", "new_empty", "new_full"})  # fmt: skip

# `isinstance(x, torch.Tensor)`: what an arm guarded so knows `x` to be.
TENSOR_CLASSES = frozenset({"torch.Tensor", "torch.nn.Parameter", "torch.nn.parameter.Parameter"})

# `isinstance(x, np.ndarray)`: classes whose instances are never tensors nor hold any
# (not `list`, `tuple`, `dict`: a batch is one)
NON_TENSOR_CLASSES = frozenset(
    {"numpy.ndarray", "numpy.generic", "PIL.Image.Image", "str", "bytes", "int", "float", "bool"}
)

PARAMETER_CLASSES = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter"})
