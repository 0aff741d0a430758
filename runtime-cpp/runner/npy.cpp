// .npy reader/writer (format: numpy.lib.format - magic "\x93NUMPY", version, header dict, data).
#include "npy.h"

#include <cstring>
#include <fstream>
#include <sstream>

namespace etkit::runner {
namespace {

struct DescrMap {
  const char* descr;
  runtime::ScalarType type;
};
const DescrMap kDescrs[] = {
    {"<f4", runtime::ScalarType::Float}, {"<f8", runtime::ScalarType::Double}, {"<f2", runtime::ScalarType::Half},
    {"<i8", runtime::ScalarType::Long},  {"<i4", runtime::ScalarType::Int},    {"<i2", runtime::ScalarType::Short},
    {"|i1", runtime::ScalarType::Char},  {"|u1", runtime::ScalarType::Byte},   {"|b1", runtime::ScalarType::Bool},
};

std::string field(const std::string& header, const std::string& key) {
  size_t k = header.find("'" + key + "'");
  if (k == std::string::npos) return "";
  size_t colon = header.find(':', k);
  if (colon == std::string::npos) return "";
  size_t start = header.find_first_not_of(" ", colon + 1);
  if (start == std::string::npos) return "";
  if (header[start] == '\'') {
    size_t end = header.find('\'', start + 1);
    return header.substr(start + 1, end - start - 1);
  }
  if (header[start] == '(') {
    size_t end = header.find(')', start);
    return header.substr(start + 1, end - start - 1);
  }
  size_t end = header.find_first_of(",}", start);
  return header.substr(start, end - start);
}

}  // namespace

bool read_npy(const std::string& path, NpyArray* out, std::string* error) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    *error = "cannot open '" + path + "'";
    return false;
  }
  char magic[8];
  if (!f.read(magic, 8) || std::memcmp(magic, "\x93NUMPY", 6) != 0) {
    *error = "'" + path + "' is not a .npy file";
    return false;
  }
  uint32_t header_len = 0;
  if (magic[6] == 1) {
    uint8_t b[2];
    f.read(reinterpret_cast<char*>(b), 2);
    header_len = b[0] | (b[1] << 8);
  } else {
    uint8_t b[4];
    f.read(reinterpret_cast<char*>(b), 4);
    header_len = b[0] | (b[1] << 8) | (b[2] << 16) | (uint32_t(b[3]) << 24);
  }
  std::string header(header_len, '\0');
  if (!f.read(&header[0], header_len)) {
    *error = "'" + path + "': truncated header";
    return false;
  }
  std::string descr = field(header, "descr");
  bool found = false;
  for (const auto& d : kDescrs) {
    if (descr == d.descr) {
      out->scalar_type = d.type;
      found = true;
    }
  }
  if (!found) {
    *error = "'" + path + "': dtype '" + descr + "' is not supported (use float32/64/16, int64/32/16/8, uint8, bool)";
    return false;
  }
  if (field(header, "fortran_order") == "True") {
    *error = "'" + path + "': Fortran-ordered arrays are not supported; save with np.ascontiguousarray";
    return false;
  }
  std::stringstream shape(field(header, "shape"));
  std::string item;
  size_t numel = 1;
  out->shape.clear();
  while (std::getline(shape, item, ',')) {
    if (item.find_first_not_of(" ") == std::string::npos) continue;
    int32_t v = std::stoi(item);
    out->shape.push_back(v);
    numel *= static_cast<size_t>(v);
  }
  size_t nbytes = numel * runtime::element_size(out->scalar_type);
  out->data.resize(nbytes);
  if (nbytes > 0 && !f.read(reinterpret_cast<char*>(out->data.data()), static_cast<std::streamsize>(nbytes))) {
    *error = "'" + path + "': file holds fewer bytes than its shape needs";
    return false;
  }
  return true;
}

bool write_npy(const std::string& path, runtime::ScalarType type, const std::vector<int32_t>& shape, const void* data,
               size_t nbytes, std::string* error) {
  const char* descr = nullptr;
  for (const auto& d : kDescrs) {
    if (d.type == type) descr = d.descr;
  }
  if (descr == nullptr) {
    *error = std::string("cannot write dtype ") + runtime::scalar_type_name(type) + " to .npy";
    return false;
  }
  std::string dims;
  for (size_t i = 0; i < shape.size(); ++i) dims += std::to_string(shape[i]) + (shape.size() == 1 || i + 1 < shape.size() ? "," : "");
  std::string header = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (" + dims + "), }";
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  std::ofstream f(path, std::ios::binary);
  if (!f) {
    *error = "cannot write '" + path + "'";
    return false;
  }
  f.write("\x93NUMPY\x01\x00", 8);
  uint16_t len = static_cast<uint16_t>(header.size());
  char lb[2] = {char(len & 0xff), char(len >> 8)};
  f.write(lb, 2);
  f.write(header.data(), static_cast<std::streamsize>(header.size()));
  f.write(static_cast<const char*>(data), static_cast<std::streamsize>(nbytes));
  return static_cast<bool>(f);
}

}  // namespace etkit::runner
