// MergedDataMap (named_data_map.h).
#include "etkit/runtime/named_data_map.h"

#include "etkit/runtime/error.h"

namespace etkit::runtime {

Error MergedDataMap::not_found(const char* key) const {
  if (key == nullptr) key = "(null)";
  if (second_ == nullptr) {
    return set_error(Error::NotFound,
                     "named data key '%s' is not in this program, and no .ptd data file was given (the program may "
                     "keep its weights in one: pass it as data_path / --data_path)",
                     key);
  }
  return set_error(Error::NotFound,
                   "named data key '%s' is in neither the program nor its .ptd data file (is it the data file "
                   "written with this program?)",
                   key);
}

Result<FreeableBuffer> MergedDataMap::get_data(const char* key) const {
  for (const NamedDataMap* map : {first_, second_}) {
    if (map == nullptr) continue;
    Result<FreeableBuffer> r = map->get_data(key);
    if (r.ok() || r.error() != Error::NotFound) return r;
  }
  return not_found(key);
}

Result<TensorLayout> MergedDataMap::get_tensor_layout(const char* key) const {
  // The first map holding the key answers, as get_data() would read its bytes from that map.
  for (const NamedDataMap* map : {first_, second_}) {
    if (map == nullptr) continue;
    Result<TensorLayout> r = map->get_tensor_layout(key);
    if (r.ok() || r.error() != Error::NotFound) return r;
  }
  return not_found(key);
}

Result<size_t> MergedDataMap::get_num_keys() const {
  size_t n = 0;
  for (const NamedDataMap* map : {first_, second_}) {
    if (map == nullptr) continue;
    ETKIT_TRY(size_t k, map->get_num_keys());
    n += k;
  }
  return n;
}

Result<const char*> MergedDataMap::get_key(size_t index) const {
  size_t first_keys = 0;
  if (first_ != nullptr) {
    ETKIT_TRY(size_t k, first_->get_num_keys());
    first_keys = k;
    if (index < first_keys) return first_->get_key(index);
  }
  if (second_ != nullptr) return second_->get_key(index - first_keys);
  return set_error(Error::InvalidArgument, "named data index %zu out of range", index);
}

}  // namespace etkit::runtime
