#pragma once
/// \file attn/attn.hpp
/// The umbrella header: every core header of attn (not the report headers).

#include "attn/detail/config.hpp"  // first: says so if this is not C++20

#include "attn/activations.hpp"  // IWYU pragma: export
#include "attn/allocator.hpp"  // IWYU pragma: export
#include "attn/attention.hpp"  // IWYU pragma: export
#include "attn/backward.hpp"   // IWYU pragma: export
#include "attn/block.hpp"      // IWYU pragma: export
#include "attn/cross_entropy.hpp"  // IWYU pragma: export
#include "attn/embedding.hpp"  // IWYU pragma: export
#include "attn/error.hpp"      // IWYU pragma: export
#include "attn/extent.hpp"     // IWYU pragma: export
#include "attn/feed_forward.hpp"  // IWYU pragma: export
#include "attn/gradcheck.hpp"  // IWYU pragma: export
#include "attn/heads.hpp"      // IWYU pragma: export
#include "attn/heads_backward.hpp"  // IWYU pragma: export
#include "attn/init.hpp"       // IWYU pragma: export
#include "attn/kv_cache.hpp"  // IWYU pragma: export
#include "attn/linear.hpp"    // IWYU pragma: export
#include "attn/logit_bias.hpp"  // IWYU pragma: export
#include "attn/jacobian.hpp"   // IWYU pragma: export
#include "attn/mask.hpp"       // IWYU pragma: export
#include "attn/named_tensor.hpp"  // IWYU pragma: export
#include "attn/norms.hpp"      // IWYU pragma: export
#include "attn/optimizer.hpp"  // IWYU pragma: export
#include "attn/matrix.hpp"     // IWYU pragma: export
#include "attn/model.hpp"      // IWYU pragma: export
#include "attn/positions.hpp"  // IWYU pragma: export
#include "attn/sampling.hpp"   // IWYU pragma: export
#include "attn/score.hpp"      // IWYU pragma: export
#include "attn/sdpa.hpp"       // IWYU pragma: export
#include "attn/sdpa_backward.hpp"  // IWYU pragma: export
#include "attn/softmax.hpp"    // IWYU pragma: export
#include "attn/split.hpp"      // IWYU pragma: export
#include "attn/vector.hpp"     // IWYU pragma: export
