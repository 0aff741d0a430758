// View and data-movement operators, all on shaders/copy.comp (an output region filled from the input
// through an affine index map), plus symbolic-size arithmetic evaluated on the host.
#include <algorithm>

#include "op_util.h"
#include "ops_impl.h"

namespace etkit_vulkan {

namespace {

constexpr size_t kMaxCopyDims = 6;

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (size_t k = s.size(); k-- > 1;) st[k - 1] = st[k] * s[k];
  return st;
}

int64_t numel_of(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t x : s) n *= x;
  return n;
}

/// Parameters of one copy dispatch: the output region and the input index map over it.
struct CopyMap {
  std::array<int32_t, 4> reg_off{0, 0, 0, 0};
  std::array<int32_t, 4> reg_sz{1, 1, 1, 1};
  std::vector<int64_t> nd_sizes;    // region shape, row-major (rank <= 6)
  std::vector<int64_t> in_strides;  // input linear-index stride per region dimension
  int64_t in_offset = 0;
};

bool apply_copy(Graph& g, int d, const std::vector<int64_t>& out_sizes, const std::vector<int64_t>& in_sizes,
                const CopyMap& m, std::string* err) {
  Push p;
  p.ivec4(whcn_sizes(out_sizes)).ivec4(whcn_sizes(in_sizes)).ivec4(m.reg_off).ivec4(m.reg_sz);
  p.i32(static_cast<int32_t>(m.nd_sizes.size())).i32(static_cast<int32_t>(m.in_offset));
  for (size_t k = 0; k < kMaxCopyDims; ++k) p.i32(k < m.nd_sizes.size() ? static_cast<int32_t>(m.nd_sizes[k]) : 1);
  for (size_t k = 0; k < kMaxCopyDims; ++k) p.i32(k < m.in_strides.size() ? static_cast<int32_t>(m.in_strides[k]) : 0);
  p.apply(g.dispatch(d));
  // invocations: output texels spanning the region
  const int32_t x0 = (m.reg_off[0] / 4) * 4;
  const int64_t span_w = m.reg_off[0] + m.reg_sz[0] - x0;
  return g.set_grid(d, (span_w + 3) / 4, m.reg_sz[1], static_cast<int64_t>(m.reg_sz[2]) * m.reg_sz[3], err);
}

/// The whole output as one region read in row-major order (views keep the element order).
CopyMap linear_map(const std::vector<int64_t>& out_sizes) {
  CopyMap m;
  m.reg_sz = whcn_sizes(out_sizes);
  m.nd_sizes = {numel_of(out_sizes)};
  m.in_strides = {1};
  return m;
}

using ShapeFn = std::function<bool(Graph&, const std::vector<int64_t>& in, std::vector<int64_t>* out, CopyMap* m,
                                   std::string* err)>;

/// One input, one output, one copy dispatch whose output sizes and map come from `fn`.
bool single_copy(Graph& g, int node, int in, int out, ShapeFn fn, std::string* e) {
  if (!need_float_tensor(g, in, "self", e) || !need_float_tensor(g, out, "the output", e)) return false;
  int d = 0;
  if (!g.add_dispatch(node, "copy", {out, in}, {}, {}, &d, e)) return false;
  g.node(node).configure = [&g, d, in, out, fn](std::string* err) {
    const std::vector<int64_t> s = g.tensor_of(in).sizes;
    std::vector<int64_t> o;
    CopyMap m;
    if (!fn(g, s, &o, &m, err)) return false;
    if (m.nd_sizes.size() > kMaxCopyDims) {
      *err = "more than 6 dimensions";
      return false;
    }
    if (!g.set_sizes(out, o, err)) return false;
    return apply_copy(g, d, o, s, m, err);
  };
  return true;
}

bool view(Graph& g, int node, const std::vector<int>& a, std::string* e) {
  if (!need_args(a, 3, e)) return false;
  const int size_arg = a[1];
  return single_copy(g, node, a[0], a.back(), [size_arg](Graph& g, const std::vector<int64_t>& s, std::vector<int64_t>* o,
                                                         CopyMap* m, std::string* err) {
    if (!g.int_list(size_arg, o, err)) return false;
    int64_t known = 1, infer = -1;
    for (size_t k = 0; k < o->size(); ++k) {
      if ((*o)[k] == -1) infer = static_cast<int64_t>(k);
      else known *= (*o)[k];
    }
    if (infer >= 0 && known > 0) (*o)[infer] = numel_of(s) / known;
    if (numel_of(*o) != numel_of(s)) {
      *err = "view of " + std::to_string(numel_of(s)) + " elements as " + std::to_string(numel_of(*o));
      return false;
    }
    *m = linear_map(*o);
    return true;
  }, e);
}

bool squeeze_dims(Graph& g, int node, const std::vector<int>& a, std::string* e) {
  // squeeze_copy.dims(self, dim[]) / squeeze_copy.default(self)
  const int dims_arg = a.size() >= 3 ? a[1] : -1;
  return single_copy(g, node, a[0], a.back(), [dims_arg](Graph& g, const std::vector<int64_t>& s,
                                                         std::vector<int64_t>* o, CopyMap* m, std::string* err) {
    std::vector<int64_t> dims;
    if (dims_arg >= 0 && !g.int_list(dims_arg, &dims, err)) return false;
    std::vector<bool> drop(s.size(), dims_arg < 0);
    for (int64_t d : dims) {
      int64_t nd = 0;
      if (!norm_dim(d, s.size(), &nd, err)) return false;
      drop[nd] = true;
    }
    o->clear();
    for (size_t k = 0; k < s.size(); ++k) {
      if (!(drop[k] && s[k] == 1)) o->push_back(s[k]);
    }
    *m = linear_map(*o);
    return true;
  }, e);
}

bool unsqueeze(Graph& g, int node, const std::vector<int>& a, std::string* e) {
  if (!need_args(a, 3, e)) return false;
  int64_t dim = 0;
  if (!g.int_arg(a[1], &dim, e)) return false;
  return single_copy(g, node, a[0], a.back(), [dim](Graph&, const std::vector<int64_t>& s, std::vector<int64_t>* o,
                                                    CopyMap* m, std::string* err) {
    int64_t d = 0;
    if (!norm_dim(dim, s.size() + 1, &d, err)) return false;
    *o = s;
    o->insert(o->begin() + d, 1);
    *m = linear_map(*o);
    return true;
  }, e);
}

bool permute(Graph& g, int node, const std::vector<int>& a, std::string* e) {
  if (!need_args(a, 3, e)) return false;
  std::vector<int64_t> perm;
  if (!g.int_list(a[1], &perm, e)) return false;
  return single_copy(g, node, a[0], a.back(), [perm](Graph&, const std::vector<int64_t>& s, std::vector<int64_t>* o,
                                                     CopyMap* m, std::string* err) {
    if (perm.size() != s.size()) {
      *err = "permutation of " + std::to_string(perm.size()) + " dims for a rank-" + std::to_string(s.size()) + " tensor";
      return false;
    }
    const std::vector<int64_t> st = contiguous_strides(s);
    o->clear();
    m->in_strides.clear();
    for (int64_t p : perm) {
      int64_t d = 0;
      if (!norm_dim(p, s.size(), &d, err)) return false;
      o->push_back(s[d]);
      m->in_strides.push_back(st[d]);
    }
    m->nd_sizes = *o;
    m->reg_sz = whcn_sizes(*o);
    return true;
  }, e);
}

bool expand(Graph& g, int node, const std::vector<int>& a, std::string* e) {
  if (!need_args(a, 3, e)) return false;
  const int size_arg = a[1];
  return single_copy(g, node, a[0], a.back(), [size_arg](Graph& g, const std::vector<int64_t>& s,
                                                         std::vector<int64_t>* o, CopyMap* m, std::string* err) {
    if (!g.int_list(size_arg, o, err)) return false;
    if (o->size() < s.size()) {
      *err = "expand to fewer dimensions than the input has";
      return false;
    }
    const size_t lead = o->size() - s.size();
    const std::vector<int64_t> st = contiguous_strides(s);
    m->in_strides.assign(o->size(), 0);
    for (size_t k = 0; k < o->size(); ++k) {
      if (k < lead) continue;
      const int64_t in = s[k - lead];
      if ((*o)[k] == -1) (*o)[k] = in;
      if (in == (*o)[k]) {
        m->in_strides[k] = st[k - lead];
      } else if (in != 1) {
        *err = "cannot expand size " + std::to_string(in) + " to " + std::to_string((*o)[k]);
        return false;
      }
    }
    m->nd_sizes = *o;
    m->reg_sz = whcn_sizes(*o);
    return true;
  }, e);
}

bool slice(Graph& g, int node, const std::vector<int>& a, std::string* e) {
  // slice_copy.Tensor(self, dim, start?, end?, step)
  if (!need_args(a, 6, e)) return false;
  int64_t dim = 0, step = 1;
  if (!g.int_arg(a[1], &dim, e) || !g.int_arg(a[4], &step, e)) return false;
  if (step < 1) {
    *e = "slice step must be positive";
    return false;
  }
  const int start_arg = a[2], end_arg = a[3];
  return single_copy(g, node, a[0], a.back(), [dim, step, start_arg, end_arg](Graph& g, const std::vector<int64_t>& s,
                                                                              std::vector<int64_t>* o, CopyMap* m,
                                                                              std::string* err) {
    int64_t d = 0;
    if (!norm_dim(dim, s.size(), &d, err)) return false;
    const int64_t n = s[d];
    int64_t start = 0, end = n;
    if (!g.is_none(start_arg) && !g.int_arg(start_arg, &start, err)) return false;
    if (!g.is_none(end_arg) && !g.int_arg(end_arg, &end, err)) return false;
    if (start < 0) start += n;
    if (end < 0) end += n;
    start = std::clamp<int64_t>(start, 0, n);
    end = std::clamp<int64_t>(end, start, n);
    const std::vector<int64_t> st = contiguous_strides(s);
    *o = s;
    (*o)[d] = (end - start + step - 1) / step;
    m->nd_sizes = *o;
    m->in_strides = st;
    m->in_strides[d] *= step;
    m->in_offset = start * st[d];
    m->reg_sz = whcn_sizes(*o);
    return true;
  }, e);
}

bool select(Graph& g, int node, const std::vector<int>& a, std::string* e) {
  // select_copy.int(self, dim, index)
  if (!need_args(a, 4, e)) return false;
  int64_t dim = 0, index = 0;
  if (!g.int_arg(a[1], &dim, e) || !g.int_arg(a[2], &index, e)) return false;
  return single_copy(g, node, a[0], a.back(), [dim, index](Graph&, const std::vector<int64_t>& s,
                                                           std::vector<int64_t>* o, CopyMap* m, std::string* err) {
    int64_t d = 0;
    if (!norm_dim(dim, s.size(), &d, err)) return false;
    const int64_t i = index < 0 ? index + s[d] : index;
    if (i < 0 || i >= s[d]) {
      *err = "index " + std::to_string(index) + " is out of range for size " + std::to_string(s[d]);
      return false;
    }
    const std::vector<int64_t> st = contiguous_strides(s);
    o->clear();
    m->in_strides.clear();
    for (size_t k = 0; k < s.size(); ++k) {
      if (static_cast<int64_t>(k) == d) continue;
      o->push_back(s[k]);
      m->in_strides.push_back(st[k]);
    }
    m->in_offset = i * st[d];
    m->nd_sizes = *o;
    if (m->nd_sizes.empty()) {
      m->nd_sizes = {1};
      m->in_strides = {0};
    }
    m->reg_sz = whcn_sizes(*o);
    return true;
  }, e);
}

/// cat.default(tensors[], dim): one copy dispatch per input, each filling its slice of the output.
bool cat(Graph& g, int node, const std::vector<int>& a, std::string* e) {
  if (!need_args(a, 3, e)) return false;
  const Value& list = g.value(a[0]);
  if (list.kind != Value::Kind::ValueList || list.items.empty()) {
    *e = "tensors must be a non-empty list";
    return false;
  }
  int64_t dim = 0;
  if (!g.int_arg(a[1], &dim, e)) return false;
  const int out = a.back();
  if (!need_float_tensor(g, out, "the output", e)) return false;
  const size_t rank = g.tensor_of(out).max_sizes.size();
  int64_t d = 0;
  if (!norm_dim(dim, rank, &d, e)) return false;
  if (rank > 4 && d < static_cast<int64_t>(rank) - 3) {
    *e = "concatenation along a leading dimension of a tensor of rank > 4 is not supported";
    return false;
  }
  std::vector<int> inputs, dispatches;
  for (int v : list.items) {
    if (!need_float_tensor(g, v, "every input", e)) return false;
    if (g.tensor_of(v).max_numel() == 0) continue;  // empty inputs contribute nothing
    int dp = 0;
    if (!g.add_dispatch(node, "copy", {out, v}, {}, {}, &dp, e)) return false;
    inputs.push_back(v);
    dispatches.push_back(dp);
  }
  const int axis = whcn_axis(d, rank);
  g.node(node).configure = [&g, inputs, dispatches, out, d, axis](std::string* err) {
    std::vector<int64_t> o = g.tensor_of(inputs[0]).sizes;
    o[d] = 0;
    for (int v : inputs) {
      const std::vector<int64_t>& s = g.tensor_of(v).sizes;
      for (size_t k = 0; k < s.size(); ++k) {
        if (static_cast<int64_t>(k) != d && s[k] != o[k]) {
          *err = "inputs differ outside the concatenation dimension";
          return false;
        }
      }
      o[d] += s[d];
    }
    if (!g.set_sizes(out, o, err)) return false;
    int64_t offset = 0;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const std::vector<int64_t>& s = g.tensor_of(inputs[i]).sizes;
      CopyMap m;
      m.reg_sz = whcn_sizes(s);
      m.reg_off[axis] = static_cast<int32_t>(offset);
      m.nd_sizes = {numel_of(s)};
      m.in_strides = {1};
      if (!apply_copy(g, dispatches[i], o, s, m, err)) return false;
      offset += s[d];
    }
    return true;
  };
  return true;
}

/// _to_copy.default(self, dtype, ...): float -> float (one float type per graph) or int -> float.
bool to_copy(Graph& g, int node, const std::vector<int>& a, std::string* e) {
  if (!need_args(a, 2, e)) return false;
  const int in = a[0], out = a.back();
  if (!need_float_tensor(g, out, "the output", e)) return false;
  if (!g.is_tensor(in)) {
    *e = "self must be a tensor";
    return false;
  }
  int dp = 0;
  if (g.tensor_of(in).kind == VTensor::Kind::Int32) {
    g.use_tensor(in);
    if (!g.add_dispatch(node, "int_to_float", {out}, {nullptr, nullptr, &g.tensor_of(in).dev}, {}, &dp, e)) return false;
  } else if (!g.add_dispatch(node, "copy", {out, in}, {}, {}, &dp, e)) {
    return false;
  }
  const bool from_int = g.tensor_of(in).kind == VTensor::Kind::Int32;
  g.node(node).configure = [&g, dp, in, out, from_int](std::string* err) {
    const std::vector<int64_t> s = g.tensor_of(in).sizes;
    if (!g.set_sizes(out, s, err)) return false;
    if (from_int) {
      Push().ivec4(whcn_sizes(s)).apply(g.dispatch(dp));
      return g.set_texel_grid(dp, s, err);
    }
    return apply_copy(g, dp, s, s, linear_map(s), err);
  };
  return true;
}

/// aten.sym_size.int(self, dim) -> SymInt: evaluated on the host whenever shapes change.
bool sym_size(Graph& g, int node, const std::vector<int>& a, std::string* e) {
  if (!need_args(a, 3, e)) return false;
  int64_t dim = 0;
  if (!g.is_tensor(a[0]) || !g.int_arg(a[1], &dim, e)) {
    if (e->empty()) *e = "self must be a tensor";
    return false;
  }
  const int in = a[0], out = a.back();
  if (g.value(out).kind != Value::Kind::SymInt && g.value(out).kind != Value::Kind::Int) {
    *e = "the output must be a SymInt";
    return false;
  }
  g.node(node).configure = [&g, in, out, dim](std::string* err) {
    const std::vector<int64_t>& s = g.tensor_of(in).sizes;
    int64_t d = 0;
    if (!norm_dim(dim, s.size(), &d, err)) return false;
    g.value(out).i = s[d];
    return true;
  };
  return true;
}

/// Symbolic-size arithmetic (Python's operator.add/sub/mul/floordiv on SymInts in the exported graph).
template <int Op>
bool sym_arith(Graph& g, int node, const std::vector<int>& a, std::string* e) {
  if (!need_args(a, 3, e)) return false;
  const int x = a[0], y = a[1], out = a.back();
  g.node(node).configure = [&g, x, y, out](std::string* err) {
    int64_t u = 0, v = 0;
    if (!g.int_arg(x, &u, err) || !g.int_arg(y, &v, err)) return false;
    int64_t r = 0;
    switch (Op) {
      case 0: r = u + v; break;
      case 1: r = u - v; break;
      case 2: r = u * v; break;
      default:
        if (v == 0) {
          *err = "division by zero";
          return false;
        }
        r = u / v - ((u % v != 0) && ((u < 0) != (v < 0)));
    }
    g.value(out).i = r;
    return true;
  };
  return true;
}

}  // namespace

void register_shape_ops(OpTable& t) {
  t["aten.view_copy.default"] = view;
  t["aten.squeeze_copy.dims"] = squeeze_dims;
  t["aten.unsqueeze_copy.default"] = unsqueeze;
  t["aten.permute_copy.default"] = permute;
  t["aten.expand_copy.default"] = expand;
  t["aten.slice_copy.Tensor"] = slice;
  t["aten.select_copy.int"] = select;
  t["aten.cat.default"] = cat;
  t["aten._to_copy.default"] = to_copy;
  t["aten.sym_size.int"] = sym_size;
  t["sym.add"] = sym_arith<0>;
  t["sym.sub"] = sym_arith<1>;
  t["sym.mul"] = sym_arith<2>;
  t["sym.floordiv"] = sym_arith<3>;
}

}  // namespace etkit_vulkan
