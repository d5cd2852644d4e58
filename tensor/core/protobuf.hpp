#pragma once
// The little of the protobuf wire format Troupe writes by hand (TensorBoard's
// Event, ONNX's ModelProto): varints, tags, fixed-width numbers and
// length-delimited fields, appended to a string. Writing only; nothing
// here parses.
#include <cstdint>
#include <cstring>
#include <string>

namespace troupe::protobuf {

inline void varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}

/// wire types: 0 varint, 1 64-bit, 2 length-delimited, 5 32-bit
inline void tag(std::string& out, uint32_t field, uint32_t wire_type) {
  varint(out, (uint64_t{field} << 3) | wire_type);
}

/// Little-endian, as on every host Troupe builds for.
template <class T>
void fixed(std::string& out, T v) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &v, sizeof(T));
  out.append(bytes, sizeof(T));
}

inline void bytes_field(std::string& out, uint32_t field, const std::string& bytes) {
  tag(out, field, 2);
  varint(out, bytes.size());
  out += bytes;
}

inline void int_field(std::string& out, uint32_t field, int64_t v) {
  tag(out, field, 0);
  varint(out, static_cast<uint64_t>(v));
}

inline void float_field(std::string& out, uint32_t field, float v) {
  tag(out, field, 5);
  fixed(out, v);
}

inline void double_field(std::string& out, uint32_t field, double v) {
  tag(out, field, 1);
  fixed(out, v);
}

} // namespace troupe::protobuf
