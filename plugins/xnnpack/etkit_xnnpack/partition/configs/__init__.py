"""Every op-family config of the XNNPACK partitioner; :data:`ALL_CONFIGS` is the default set."""
from .dynamic_quant import DynamicQuantChainConfig
from .elementwise import (BinaryConfig, ClampConfig, EluConfig, GeluConfig, HardswishConfig, LeakyReluConfig,
                          PReLUConfig, SafeSoftmaxConfig, SoftmaxConfig, SquareConfig, ToCopyConfig, UnaryConfig)
from .gemm import AddmmConfig, BmmConfig, ConvolutionConfig, LinearConfig, MmConfig
from .pooling import (AvgPool2dConfig, BatchNormConfig, GetItemConfig, LayerNormConfig, MaxPool2dConfig,
                      MeanDimConfig, UpsampleBilinear2dConfig)
from .quant import DequantizeConfig, QuantizeConfig
from .shape import (CatConfig, ConstantPadConfig, ExpandConfig, PermuteConfig, ReshapeConfig, SliceConfig,
                    SplitConfig)

#: Config classes the partitioner uses by default (instantiated per partitioner).
ALL_CONFIGS = (
    ConvolutionConfig, LinearConfig, AddmmConfig, MmConfig, BmmConfig,
    BinaryConfig, UnaryConfig, HardswishConfig, ClampConfig, GeluConfig, LeakyReluConfig, EluConfig, SquareConfig,
    PReLUConfig, UpsampleBilinear2dConfig,
    SoftmaxConfig, SafeSoftmaxConfig, ToCopyConfig,
    MeanDimConfig, AvgPool2dConfig, MaxPool2dConfig, BatchNormConfig, LayerNormConfig, GetItemConfig,
    ReshapeConfig, PermuteConfig, ExpandConfig, CatConfig, SliceConfig, SplitConfig, ConstantPadConfig,
    QuantizeConfig, DequantizeConfig, DynamicQuantChainConfig,
)

__all__ = [c.__name__ for c in ALL_CONFIGS] + ["ALL_CONFIGS"]
