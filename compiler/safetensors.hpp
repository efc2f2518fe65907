// Reading and writing safetensors checkpoints (the Hugging Face format trained weights ship in):
// an 8-byte little-endian header length, a JSON header {name: {dtype, shape, data_offsets}} with an
// optional "__metadata__" of strings, then the raw little-endian data buffer.
//
// The reader converts every tensor to doubles, exactly (F64, F32, F16, BF16; I64 and I32 up to
// 2^53), and checks the file as a whole before trusting any of it: the header length against the
// file, each tensor's offsets against the buffer and against its shape and dtype, no two tensors
// sharing bytes, no byte of the buffer left unowned (the format's rule), and no NaN or infinity.
// Every problem is one aoc::Error line naming the file and the tensor:
//   model.safetensors: tensor 'backbone.norm_f.weight': data_offsets [0, 4096] end past the 1024-byte buffer
//
// A sharded checkpoint's index (model.safetensors.index.json, told by its content): its
// "weight_map" names each tensor's shard, a file next to the index; all shards are read.
#pragma once
#include <map>
#include <string>

#include "compiler/ir.hpp"

namespace aoc::ir {

// What the writer stores the doubles as.
enum class SafetensorsDType { F32, F64 };

// A checkpoint in memory: every tensor, converted to double.
struct Checkpoint {
  std::string path;                           // as given (a .safetensors file or an index .json)
  WeightStore tensors;
  std::map<std::string, std::string> metadata;  // "__metadata__" (of the index, or of every shard merged)
};

Checkpoint read_safetensors(const std::string& path);

// What a weights file holds, told by its first bytes, whatever its name: an HDF5 file (an aoc
// weights file), a safetensors file (its 8-byte header length, then '{') or a sharded
// checkpoint's index (JSON). Anything else is an aoc::Error naming the file.
enum class WeightsFormat { Hdf5, Safetensors, SafetensorsIndex };
WeightsFormat weights_format(const std::string& path);

// Writes `store` as one safetensors file (via a temporary file renamed into place). F32 rounds each
// value to nearest; a value outside float's range, a NaN or an infinity is an error naming it.
void write_safetensors(const std::string& path, const WeightStore& store, SafetensorsDType dtype = SafetensorsDType::F32,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace aoc::ir
