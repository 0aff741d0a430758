// The portable kernel table: ExecuTorch operator names -> functions.
// Names match ExecuTorch's kernels/portable/functions.yaml ("aten::<op>.<overload>").
#include "kernels.h"

namespace etkit::portable {

void convolution_out(KernelRuntimeContext&, Span<EValue*>);
void max_pool2d_with_indices_out(KernelRuntimeContext&, Span<EValue*>);
void avg_pool2d_out(KernelRuntimeContext&, Span<EValue*>);
void adaptive_avg_pool2d_out(KernelRuntimeContext&, Span<EValue*>);
void mul_out(KernelRuntimeContext&, Span<EValue*>);
void mul_scalar_out(KernelRuntimeContext&, Span<EValue*>);
void div_out(KernelRuntimeContext&, Span<EValue*>);
void div_scalar_out(KernelRuntimeContext&, Span<EValue*>);
void pow_tensor_tensor_out(KernelRuntimeContext&, Span<EValue*>);
void pow_tensor_scalar_out(KernelRuntimeContext&, Span<EValue*>);
void remainder_tensor_out(KernelRuntimeContext&, Span<EValue*>);
void remainder_scalar_out(KernelRuntimeContext&, Span<EValue*>);
void fmod_tensor_out(KernelRuntimeContext&, Span<EValue*>);
void fmod_scalar_out(KernelRuntimeContext&, Span<EValue*>);
void floor_divide_out(KernelRuntimeContext&, Span<EValue*>);
void maximum_out(KernelRuntimeContext&, Span<EValue*>);
void minimum_out(KernelRuntimeContext&, Span<EValue*>);
void atan2_out(KernelRuntimeContext&, Span<EValue*>);
void eq_tensor_out(KernelRuntimeContext&, Span<EValue*>);
void eq_scalar_out(KernelRuntimeContext&, Span<EValue*>);
void ne_tensor_out(KernelRuntimeContext&, Span<EValue*>);
void ne_scalar_out(KernelRuntimeContext&, Span<EValue*>);
void lt_tensor_out(KernelRuntimeContext&, Span<EValue*>);
void lt_scalar_out(KernelRuntimeContext&, Span<EValue*>);
void le_tensor_out(KernelRuntimeContext&, Span<EValue*>);
void le_scalar_out(KernelRuntimeContext&, Span<EValue*>);
void gt_tensor_out(KernelRuntimeContext&, Span<EValue*>);
void gt_scalar_out(KernelRuntimeContext&, Span<EValue*>);
void ge_tensor_out(KernelRuntimeContext&, Span<EValue*>);
void ge_scalar_out(KernelRuntimeContext&, Span<EValue*>);
void logical_and_out(KernelRuntimeContext&, Span<EValue*>);
void logical_or_out(KernelRuntimeContext&, Span<EValue*>);
void logical_xor_out(KernelRuntimeContext&, Span<EValue*>);
void bitwise_and_tensor_out(KernelRuntimeContext&, Span<EValue*>);
void bitwise_and_scalar_out(KernelRuntimeContext&, Span<EValue*>);
void bitwise_or_tensor_out(KernelRuntimeContext&, Span<EValue*>);
void bitwise_or_scalar_out(KernelRuntimeContext&, Span<EValue*>);
void bitwise_xor_tensor_out(KernelRuntimeContext&, Span<EValue*>);
void bitwise_xor_scalar_out(KernelRuntimeContext&, Span<EValue*>);
void add_out(KernelRuntimeContext&, Span<EValue*>);
void add_scalar_out(KernelRuntimeContext&, Span<EValue*>);
void sub_out(KernelRuntimeContext&, Span<EValue*>);
void sub_scalar_out(KernelRuntimeContext&, Span<EValue*>);
void rsub_scalar_out(KernelRuntimeContext&, Span<EValue*>);
void div_out_mode(KernelRuntimeContext&, Span<EValue*>);
void div_scalar_mode_out(KernelRuntimeContext&, Span<EValue*>);
void pow_scalar_out(KernelRuntimeContext&, Span<EValue*>);
void where_self_out(KernelRuntimeContext&, Span<EValue*>);
void masked_fill_scalar_out(KernelRuntimeContext&, Span<EValue*>);
void bitwise_not_out(KernelRuntimeContext&, Span<EValue*>);
void gelu_out(KernelRuntimeContext&, Span<EValue*>);
void hardtanh_out(KernelRuntimeContext&, Span<EValue*>);
void clamp_out(KernelRuntimeContext&, Span<EValue*>);
void clamp_tensor_out(KernelRuntimeContext&, Span<EValue*>);
void leaky_relu_out(KernelRuntimeContext&, Span<EValue*>);
void elu_out(KernelRuntimeContext&, Span<EValue*>);
void mm_out(KernelRuntimeContext&, Span<EValue*>);
void bmm_out(KernelRuntimeContext&, Span<EValue*>);
void addmm_out(KernelRuntimeContext&, Span<EValue*>);
void sum_intlist_out(KernelRuntimeContext&, Span<EValue*>);
void mean_out(KernelRuntimeContext&, Span<EValue*>);
void mean_dtype_out(KernelRuntimeContext&, Span<EValue*>);
void amax_out(KernelRuntimeContext&, Span<EValue*>);
void amin_out(KernelRuntimeContext&, Span<EValue*>);
void any_all_out(KernelRuntimeContext&, Span<EValue*>);
void any_dims_out(KernelRuntimeContext&, Span<EValue*>);
void any_out(KernelRuntimeContext&, Span<EValue*>);
void argmax_out(KernelRuntimeContext&, Span<EValue*>);
void argmin_out(KernelRuntimeContext&, Span<EValue*>);
void max_dim_max(KernelRuntimeContext&, Span<EValue*>);
void min_dim_min(KernelRuntimeContext&, Span<EValue*>);
void softmax_out(KernelRuntimeContext&, Span<EValue*>);
void cumsum_out(KernelRuntimeContext&, Span<EValue*>);
void native_layer_norm_out(KernelRuntimeContext&, Span<EValue*>);
void native_batch_norm_legit_no_training_out(KernelRuntimeContext&, Span<EValue*>);
void view_copy_out(KernelRuntimeContext&, Span<EValue*>);
void permute_copy_out(KernelRuntimeContext&, Span<EValue*>);
void transpose_copy_int_out(KernelRuntimeContext&, Span<EValue*>);
void t_copy_out(KernelRuntimeContext&, Span<EValue*>);
void expand_copy_out(KernelRuntimeContext&, Span<EValue*>);
void slice_copy_tensor_out(KernelRuntimeContext&, Span<EValue*>);
void select_copy_int_out(KernelRuntimeContext&, Span<EValue*>);
void unsqueeze_copy_out(KernelRuntimeContext&, Span<EValue*>);
void squeeze_copy_dims_out(KernelRuntimeContext&, Span<EValue*>);
void squeeze_copy_dim_out(KernelRuntimeContext&, Span<EValue*>);
void squeeze_copy_out(KernelRuntimeContext&, Span<EValue*>);
void clone_out(KernelRuntimeContext&, Span<EValue*>);
void to_dim_order_copy_out(KernelRuntimeContext&, Span<EValue*>);
void alias_copy_out(KernelRuntimeContext&, Span<EValue*>);
void full_out(KernelRuntimeContext&, Span<EValue*>);
void zeros_out(KernelRuntimeContext&, Span<EValue*>);
void ones_out(KernelRuntimeContext&, Span<EValue*>);
void full_like_out(KernelRuntimeContext&, Span<EValue*>);
void scalar_tensor_out(KernelRuntimeContext&, Span<EValue*>);
void arange_start_out(KernelRuntimeContext&, Span<EValue*>);
void arange_out(KernelRuntimeContext&, Span<EValue*>);
void index_select_out(KernelRuntimeContext&, Span<EValue*>);
void embedding_out(KernelRuntimeContext&, Span<EValue*>);
void index_tensor_out(KernelRuntimeContext&, Span<EValue*>);
void gather_out(KernelRuntimeContext&, Span<EValue*>);
void cat_out(KernelRuntimeContext&, Span<EValue*>);
void stack_out(KernelRuntimeContext&, Span<EValue*>);
void split_with_sizes_copy_out(KernelRuntimeContext&, Span<EValue*>);
void split_copy_tensor_out(KernelRuntimeContext&, Span<EValue*>);
void unbind_copy_int_out(KernelRuntimeContext&, Span<EValue*>);
void constant_pad_nd_out(KernelRuntimeContext&, Span<EValue*>);
void repeat_out(KernelRuntimeContext&, Span<EValue*>);
void sym_size_int(KernelRuntimeContext&, Span<EValue*>);
void sym_numel(KernelRuntimeContext&, Span<EValue*>);

void neg_out(KernelRuntimeContext&, Span<EValue*>);
void abs_out(KernelRuntimeContext&, Span<EValue*>);
void exp_out(KernelRuntimeContext&, Span<EValue*>);
void expm1_out(KernelRuntimeContext&, Span<EValue*>);
void log_out(KernelRuntimeContext&, Span<EValue*>);
void log1p_out(KernelRuntimeContext&, Span<EValue*>);
void log2_out(KernelRuntimeContext&, Span<EValue*>);
void log10_out(KernelRuntimeContext&, Span<EValue*>);
void sqrt_out(KernelRuntimeContext&, Span<EValue*>);
void rsqrt_out(KernelRuntimeContext&, Span<EValue*>);
void reciprocal_out(KernelRuntimeContext&, Span<EValue*>);
void sin_out(KernelRuntimeContext&, Span<EValue*>);
void cos_out(KernelRuntimeContext&, Span<EValue*>);
void tan_out(KernelRuntimeContext&, Span<EValue*>);
void asin_out(KernelRuntimeContext&, Span<EValue*>);
void acos_out(KernelRuntimeContext&, Span<EValue*>);
void atan_out(KernelRuntimeContext&, Span<EValue*>);
void sinh_out(KernelRuntimeContext&, Span<EValue*>);
void cosh_out(KernelRuntimeContext&, Span<EValue*>);
void tanh_out(KernelRuntimeContext&, Span<EValue*>);
void asinh_out(KernelRuntimeContext&, Span<EValue*>);
void acosh_out(KernelRuntimeContext&, Span<EValue*>);
void atanh_out(KernelRuntimeContext&, Span<EValue*>);
void sigmoid_out(KernelRuntimeContext&, Span<EValue*>);
void relu_out(KernelRuntimeContext&, Span<EValue*>);
void erf_out(KernelRuntimeContext&, Span<EValue*>);
void ceil_out(KernelRuntimeContext&, Span<EValue*>);
void floor_out(KernelRuntimeContext&, Span<EValue*>);
void round_out(KernelRuntimeContext&, Span<EValue*>);
void trunc_out(KernelRuntimeContext&, Span<EValue*>);
void sign_out(KernelRuntimeContext&, Span<EValue*>);
void logical_not_out(KernelRuntimeContext&, Span<EValue*>);
void isnan_out(KernelRuntimeContext&, Span<EValue*>);
void isinf_out(KernelRuntimeContext&, Span<EValue*>);
void hardswish_out(KernelRuntimeContext&, Span<EValue*>);
void hardsigmoid_out(KernelRuntimeContext&, Span<EValue*>);
void silu_out(KernelRuntimeContext&, Span<EValue*>);

void clone_dim_order_out(KernelRuntimeContext&, Span<EValue*>);
void detach_copy_out(KernelRuntimeContext&, Span<EValue*>);
void lift_fresh_copy_out(KernelRuntimeContext&, Span<EValue*>);
void log_softmax_out(KernelRuntimeContext&, Span<EValue*>);
void to_copy_out(KernelRuntimeContext&, Span<EValue*>);

void copy_inplace(KernelRuntimeContext&, Span<EValue*>);
void copy_out(KernelRuntimeContext&, Span<EValue*>);

void native_group_norm_out(KernelRuntimeContext&, Span<EValue*>);
void upsample_nearest2d_vec_out(KernelRuntimeContext&, Span<EValue*>);
void upsample_bilinear2d_vec_out(KernelRuntimeContext&, Span<EValue*>);
void var_correction_out(KernelRuntimeContext&, Span<EValue*>);
void max_unary_out(KernelRuntimeContext&, Span<EValue*>);
void min_unary_out(KernelRuntimeContext&, Span<EValue*>);
void flip_out(KernelRuntimeContext&, Span<EValue*>);

namespace {
const Kernel kKernels[] = {
    {"aten::native_group_norm.out", native_group_norm_out},
    {"aten::upsample_nearest2d.vec_out", upsample_nearest2d_vec_out},
    {"aten::upsample_bilinear2d.vec_out", upsample_bilinear2d_vec_out},
    {"aten::var.correction_out", var_correction_out},
    {"aten::max.unary_out", max_unary_out},
    {"aten::min.unary_out", min_unary_out},
    {"aten::flip.out", flip_out},
    {"aten::copy_", copy_inplace},
    {"aten::copy.out", copy_out},
    {"dim_order_ops::_clone_dim_order.out", clone_dim_order_out},
    {"aten::detach_copy.out", detach_copy_out},
    {"aten::lift_fresh_copy.out", lift_fresh_copy_out},
    {"aten::_log_softmax.out", log_softmax_out},
    {"aten::_to_copy.out", to_copy_out},
    {"aten::neg.out", neg_out},
    {"aten::abs.out", abs_out},
    {"aten::exp.out", exp_out},
    {"aten::expm1.out", expm1_out},
    {"aten::log.out", log_out},
    {"aten::log1p.out", log1p_out},
    {"aten::log2.out", log2_out},
    {"aten::log10.out", log10_out},
    {"aten::sqrt.out", sqrt_out},
    {"aten::rsqrt.out", rsqrt_out},
    {"aten::reciprocal.out", reciprocal_out},
    {"aten::sin.out", sin_out},
    {"aten::cos.out", cos_out},
    {"aten::tan.out", tan_out},
    {"aten::asin.out", asin_out},
    {"aten::acos.out", acos_out},
    {"aten::atan.out", atan_out},
    {"aten::sinh.out", sinh_out},
    {"aten::cosh.out", cosh_out},
    {"aten::tanh.out", tanh_out},
    {"aten::asinh.out", asinh_out},
    {"aten::acosh.out", acosh_out},
    {"aten::atanh.out", atanh_out},
    {"aten::sigmoid.out", sigmoid_out},
    {"aten::relu.out", relu_out},
    {"aten::erf.out", erf_out},
    {"aten::ceil.out", ceil_out},
    {"aten::floor.out", floor_out},
    {"aten::round.out", round_out},
    {"aten::trunc.out", trunc_out},
    {"aten::sign.out", sign_out},
    {"aten::logical_not.out", logical_not_out},
    {"aten::isnan.out", isnan_out},
    {"aten::isinf.out", isinf_out},
    {"aten::hardswish.out", hardswish_out},
    {"aten::hardsigmoid.out", hardsigmoid_out},
    {"aten::silu.out", silu_out},
    {"aten::convolution.out", convolution_out},
    {"aten::max_pool2d_with_indices.out", max_pool2d_with_indices_out},
    {"aten::avg_pool2d.out", avg_pool2d_out},
    {"aten::_adaptive_avg_pool2d.out", adaptive_avg_pool2d_out},
    {"aten::mul.out", mul_out},
    {"aten::mul.Scalar_out", mul_scalar_out},
    {"aten::div.out", div_out},
    {"aten::div.Scalar_out", div_scalar_out},
    {"aten::pow.Tensor_Tensor_out", pow_tensor_tensor_out},
    {"aten::pow.Tensor_Scalar_out", pow_tensor_scalar_out},
    {"aten::remainder.Tensor_out", remainder_tensor_out},
    {"aten::remainder.Scalar_out", remainder_scalar_out},
    {"aten::fmod.Tensor_out", fmod_tensor_out},
    {"aten::fmod.Scalar_out", fmod_scalar_out},
    {"aten::floor_divide.out", floor_divide_out},
    {"aten::maximum.out", maximum_out},
    {"aten::minimum.out", minimum_out},
    {"aten::atan2.out", atan2_out},
    {"aten::eq.Tensor_out", eq_tensor_out},
    {"aten::eq.Scalar_out", eq_scalar_out},
    {"aten::ne.Tensor_out", ne_tensor_out},
    {"aten::ne.Scalar_out", ne_scalar_out},
    {"aten::lt.Tensor_out", lt_tensor_out},
    {"aten::lt.Scalar_out", lt_scalar_out},
    {"aten::le.Tensor_out", le_tensor_out},
    {"aten::le.Scalar_out", le_scalar_out},
    {"aten::gt.Tensor_out", gt_tensor_out},
    {"aten::gt.Scalar_out", gt_scalar_out},
    {"aten::ge.Tensor_out", ge_tensor_out},
    {"aten::ge.Scalar_out", ge_scalar_out},
    {"aten::logical_and.out", logical_and_out},
    {"aten::logical_or.out", logical_or_out},
    {"aten::logical_xor.out", logical_xor_out},
    {"aten::bitwise_and.Tensor_out", bitwise_and_tensor_out},
    {"aten::bitwise_and.Scalar_out", bitwise_and_scalar_out},
    {"aten::bitwise_or.Tensor_out", bitwise_or_tensor_out},
    {"aten::bitwise_or.Scalar_out", bitwise_or_scalar_out},
    {"aten::bitwise_xor.Tensor_out", bitwise_xor_tensor_out},
    {"aten::bitwise_xor.Scalar_out", bitwise_xor_scalar_out},
    {"aten::add.out", add_out},
    {"aten::add.Scalar_out", add_scalar_out},
    {"aten::sub.out", sub_out},
    {"aten::sub.Scalar_out", sub_scalar_out},
    {"aten::rsub.Scalar_out", rsub_scalar_out},
    {"aten::div.out_mode", div_out_mode},
    {"aten::div.Scalar_mode_out", div_scalar_mode_out},
    {"aten::pow.Scalar_out", pow_scalar_out},
    {"aten::where.self_out", where_self_out},
    {"aten::masked_fill.Scalar_out", masked_fill_scalar_out},
    {"aten::bitwise_not.out", bitwise_not_out},
    {"aten::gelu.out", gelu_out},
    {"aten::hardtanh.out", hardtanh_out},
    {"aten::clamp.out", clamp_out},
    {"aten::clamp.Tensor_out", clamp_tensor_out},
    {"aten::leaky_relu.out", leaky_relu_out},
    {"aten::elu.out", elu_out},
    {"aten::mm.out", mm_out},
    {"aten::bmm.out", bmm_out},
    {"aten::addmm.out", addmm_out},
    {"aten::sum.IntList_out", sum_intlist_out},
    {"aten::mean.out", mean_out},
    {"aten::mean.dtype_out", mean_dtype_out},
    {"aten::amax.out", amax_out},
    {"aten::amin.out", amin_out},
    {"aten::any.all_out", any_all_out},
    {"aten::any.dims_out", any_dims_out},
    {"aten::any.out", any_out},
    {"aten::argmax.out", argmax_out},
    {"aten::argmin.out", argmin_out},
    {"aten::max.dim_max", max_dim_max},
    {"aten::min.dim_min", min_dim_min},
    {"aten::_softmax.out", softmax_out},
    {"aten::cumsum.out", cumsum_out},
    {"aten::native_layer_norm.out", native_layer_norm_out},
    {"aten::_native_batch_norm_legit_no_training.out", native_batch_norm_legit_no_training_out},
    {"aten::view_copy.out", view_copy_out},
    {"aten::permute_copy.out", permute_copy_out},
    {"aten::transpose_copy.int_out", transpose_copy_int_out},
    {"aten::t_copy.out", t_copy_out},
    {"aten::expand_copy.out", expand_copy_out},
    {"aten::slice_copy.Tensor_out", slice_copy_tensor_out},
    {"aten::select_copy.int_out", select_copy_int_out},
    {"aten::unsqueeze_copy.out", unsqueeze_copy_out},
    {"aten::squeeze_copy.dims_out", squeeze_copy_dims_out},
    {"aten::squeeze_copy.dim_out", squeeze_copy_dim_out},
    {"aten::squeeze_copy.out", squeeze_copy_out},
    {"aten::clone.out", clone_out},
    {"dim_order_ops::_to_dim_order_copy.out", to_dim_order_copy_out},
    {"aten::alias_copy.out", alias_copy_out},
    {"aten::full.out", full_out},
    {"aten::zeros.out", zeros_out},
    {"aten::ones.out", ones_out},
    {"aten::full_like.out", full_like_out},
    {"aten::scalar_tensor.out", scalar_tensor_out},
    {"aten::arange.start_out", arange_start_out},
    {"aten::arange.out", arange_out},
    {"aten::index_select.out", index_select_out},
    {"aten::embedding.out", embedding_out},
    {"aten::index.Tensor_out", index_tensor_out},
    {"aten::gather.out", gather_out},
    {"aten::cat.out", cat_out},
    {"aten::stack.out", stack_out},
    {"aten::split_with_sizes_copy.out", split_with_sizes_copy_out},
    {"aten::split_copy.Tensor_out", split_copy_tensor_out},
    {"aten::unbind_copy.int_out", unbind_copy_int_out},
    {"aten::constant_pad_nd.out", constant_pad_nd_out},
    {"aten::repeat.out", repeat_out},
    {"aten::sym_size.int", sym_size_int},
    {"aten::sym_numel", sym_numel},
};
}  // namespace

const Kernel* kernel_table() { return kKernels; }
size_t kernel_table_size() { return sizeof(kKernels) / sizeof(kKernels[0]); }

}  // namespace etkit::portable
