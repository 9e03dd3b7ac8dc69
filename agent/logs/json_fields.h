#pragma once
// Reading fields of a JSON object parsed into google.protobuf.Struct (the error files and
// FileTimer requests workers write).

#include <string>

#include "google/protobuf/struct.pb.h"

namespace ddprun {

/// The field `name` of `object`, or null when it has none.
inline const google::protobuf::Value* JsonField(const google::protobuf::Struct& object,
                                                const std::string& name) {
  auto it = object.fields().find(name);
  return it == object.fields().end() ? nullptr : &it->second;
}

}  // namespace ddprun
