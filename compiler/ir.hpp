// The graph IR: what a user's model is before the compiler lowers it onto the optical core.
//
// A small, typed, SSA IR in the spirit of MLIR: a Graph is a list of inputs, weights and ops in
// definition order; every value has one definition and a type (dtype + shape, where a dimension is
// a fixed size or a symbol such as "B" or "L" bound when the graph runs); a FixedPoint op owns a
// Region (its body) that maps the iterate to its next value. Plain data: passes and the
// interpreter walk the vectors. The JSON form is documented in docs/ir.md.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace aoc::ir {

// A dimension: a fixed size (size >= 0) or a symbol (size < 0, sym non-empty) bound at run time.
struct Dim {
  std::int64_t size = -1;
  std::string sym;
  static Dim fixed(std::int64_t n) { return {n, {}}; }
  static Dim symbol(std::string s) { return {-1, std::move(s)}; }
  bool is_fixed() const { return size >= 0; }
  bool operator==(const Dim& o) const { return size == o.size && sym == o.sym; }
};
using Shape = std::vector<Dim>;

enum class DType { F64, I64 };

struct Type {
  DType dtype = DType::F64;
  Shape shape;
  bool operator==(const Type& o) const { return dtype == o.dtype && shape == o.shape; }
};

std::string to_string(const Dim& d);
std::string to_string(const Type& t);  // "f64[B, L, 768]"

// The ops. Each kind's operands, attributes, shape rule, evaluation and cost are its record in
// compiler/ops/ (compiler/op_def.hpp); docs/ir.md describes them.
enum class OpKind {
  Linear,        // y = x W^T (+ b): x[..., in], W[out, in], b[out] -> [..., out]  (torch convention)
  MatMul,        // y = a b: a[..., k], b[k, n] -> [..., n]                         (AOC convention)
  Conv2d,        // x[..., H, W, Cin], W[Cout, kh, kw, Cin] (, b[Cout]) -> [..., Ho, Wo, Cout]; attr stride;
                 // valid padding; on the optics W is the matrix [Cout, kh*kw*Cin], one product per position
  Add, Sub, Mul, // elementwise with trailing-dimension broadcasting
  Tanh, Sigmoid, SiLU, Softplus, Exp, Neg, Relu,
  Clip,          // attrs min, max
  RMSNorm,       // x / sqrt(mean(x^2 over the last dim) + eps) * g; attrs eps
  GatedRMSNorm,  // RMSNorm(x * SiLU(gate)) * g (Mamba2's gated norm); attrs eps
  Softmax,       // exp(x) / sum(exp(x)) over the last dim (modern Hopfield layers' retrieval)
  Conv1dCausal,  // depthwise along axis 1: x[B, L, ..., C], w[C, K] (, b[C]) -> x's shape
  AvgPool2d, MaxPool2d,  // x[..., H, W, C] -> [..., H/size, W/size, C]; attr size (= the stride)
  Upsample2d,    // nearest neighbour: x[..., H, W, C] -> [..., H*scale, W*scale, C]; attr scale
  Embedding,     // ids i64[...], table[V, D] -> [..., D]
  Split,         // x -> several results along `axis`, attrs sizes
  Concat,        // several -> one along `axis`
  Reshape,       // attrs shape (may use the input's symbols)
  Einsum,        // attrs spec, e.g. "blh,bln,blhp->blhpn" (contractions of the SSM)
  Scan,          // diagonal linear recurrence along axis 1: h_t = a_t * h_{t-1} + x_t (a broadcast
                 // over x's trailing dims); a[B, L, ...], x[B, L, ...] (, h0[B, ...])
  CausalAttention,  // q, k, v [B, L, D] -> [B, L, D]: `heads` heads of D/heads, RoPE (rotate-half)
                    // on q, k when `rope_theta` is given, causal softmax with scale 1/sqrt(d_head)
  Delay,         // the previous token along axis 1: y[:, t] = x[:, t-1], zeros at t = 0 (in sequential
                 // mode the committed value of the last token); the state memory of a recurrence
  Convert,       // a crossing between the analog and the digital domain, put in by the partition
                 // pass: attr to = "digital" (an ADC) or "analog" (a DAC); the identity in the
                 // interpreter, a quantizer on the simulator
  FixedPoint,    // z* = f(z*; captures): owns a body Region; attrs tol, max_iter, damping, rule
};

// Every op may carry `place` ("optical", "analog" or "digital"): where the compiler put it.
// The lowering passes set it; a graph from a user or the importer has none.
inline constexpr const char* kPlaceAttr = "place";

struct Region;

// An attribute value: a number, an integer, a string, or a list of integers.
using Attr = std::variant<double, std::int64_t, std::string, std::vector<std::int64_t>>;

// A FixedPoint's body, held by value: copying an op (or a graph) copies its body, so that a pass
// working on a copy never changes the region of the graph it was copied from.
class Body {
 public:
  Body() = default;
  Body(std::nullptr_t) {}
  Body(std::shared_ptr<Region> r) : p_(std::move(r)) {}
  Body(const Body& o);
  Body& operator=(const Body& o);
  Body(Body&&) noexcept = default;
  Body& operator=(Body&&) noexcept = default;
  Region* operator->() const { return p_.get(); }
  Region& operator*() const { return *p_; }
  explicit operator bool() const { return p_ != nullptr; }

 private:
  std::shared_ptr<Region> p_;
};

struct Op {
  OpKind kind{};
  std::string name;                 // optional label ("layer0.in_proj"), for messages and reports
  std::vector<std::string> inputs;  // value names
  std::vector<std::string> outputs;
  std::map<std::string, Attr> attrs;
  Body body;                        // FixedPoint only
};

Op make_op(OpKind kind, std::vector<std::string> inputs, std::vector<std::string> outputs,
           std::map<std::string, Attr> attrs = {}, std::string name = {});

// A FixedPoint body: args[0] is the iterate z, args[1..] bind the op's inputs (the captures) in
// order; results[0] is the next iterate, of z's type.
struct Region {
  std::vector<std::string> args;
  std::vector<Op> ops;
  std::vector<std::string> results;
};

struct Value {
  std::string name;
  Type type;
};

struct Graph {
  std::string name;
  std::vector<Value> inputs;
  std::vector<Value> weights;  // parameters, by name; their data live in a WeightStore
  std::vector<Op> ops;         // the top-level region, in definition order
  std::vector<std::string> outputs;
};

// Whether `name` is one of g's weights.
bool is_weight(const Graph& g, const std::string& name);
// An op the optical core can run: a product with a programmed matrix (a weight), no bias: a Linear
// x W^T, a MatMul a W, or a Conv2d (its W as the matrix [Cout, kh*kw*Cin], one product per output
// position).
bool optical_capable(const Graph& g, const Op& op);

// Dense row-major tensors of doubles (i64 data is stored as exact doubles).
// Dims as text for messages: "[2, 3]".
std::string shape_text(const std::vector<std::int64_t>& dims);

// The most elements one value may have (2^50): far beyond any machine, small enough that element
// counts, byte sizes and offsets computed from shapes never overflow.
inline constexpr std::int64_t kMaxElements = std::int64_t{1} << 50;
// The product of dims, or -1 when a dim is negative or the product exceeds kMaxElements.
std::int64_t checked_elements(const std::vector<std::int64_t>& dims);

struct Tensor {
  std::vector<std::int64_t> shape;
  std::vector<double> data;
  std::int64_t size() const;  // its shape's element count; throws aoc::Error beyond kMaxElements
};
using WeightStore = std::map<std::string, Tensor>;

// The index of the largest element of each vector along the last axis (the decision of each
// position of a logits tensor), in row-major order.
std::vector<std::int64_t> argmax_last(const Tensor& t);
// The fraction of positions whose argmax is the label (labels: one per position, in argmax_last's
// order; a label < 0 is masked and not counted); 0 when none counts. A count mismatch throws.
double label_accuracy(const Tensor& logits, const Tensor& labels);
// A language model's next-token cross-entropy, in nats: the mean over b and t < L - 1 of
// -log softmax(logits[b, t])[tokens[b, t + 1]], for logits [B, L, V] and tokens [B, L]; nullopt
// when the shapes are not those (or L < 2). Perplexity is its exp.
std::optional<double> next_token_cross_entropy(const Tensor& logits, const Tensor& tokens);

}  // namespace aoc::ir
