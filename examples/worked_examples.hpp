#pragma once
// examples/worked_examples.hpp: what the worked examples W2–W12 (NEXT_SECTIONS.md) choose for
// themselves, and the numbers they print where the unit gives none.
//
// The unit fixes some numbers (W2's context, W4's weights, W12's sizes); those stand in the
// example programs as the unit's, like E1–E7's. Everything else (the weights W3 picks so that
// "drink" looks at "tea", the maps and outputs they give) is here, once: each example computes
// its numbers with attn and checks the printed text against these, and
// tests/test_worked_examples.cpp derives every one of them again from the formulas, written out
// in long double, never from a run of attn. Expected numbers are row-major, as printed.

#include <cstddef>

#include "attn/matrix.hpp"

namespace worked {

// "I drink tea", one row per word: each word points at its own direction (E1's notes).
inline constexpr attn::Matrix<double, 3, 3> i_drink_tea{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};

// W2: the soft lookup's context when the query is twice as sure (β = 2, E2's weights).
namespace w2 {
inline constexpr const char* sharp_context[] = {"0.064", "0.983"};
}  // namespace w2

// W3: self-attention by hand. A query asks along two directions ("who acts?", "what is acted
// on?"), a key answers along them: "drink" asks the second, which "tea" answers most. Values are
// W2's Hindi vectors: v(I) = (1, 0), v(drink) = (1, 1), v(tea) = (0, 1).
namespace w3 {
inline constexpr attn::Matrix<double, 3, 2> W_Q{{1, 0}, {0, 1}, {1, 1}};
inline constexpr attn::Matrix<double, 3, 2> W_K{{2, 0}, {1.5, 1.5}, {0, 2}};
inline constexpr attn::Matrix<double, 3, 2> W_V{{1, 0}, {1, 1}, {0, 1}};
inline constexpr const char* drink_scores[] = {"0.000", "1.061", "1.414"};  // q·k/√2
inline constexpr const char* map[] = {"0.514", "0.361", "0.125",   // I
                                      "0.125", "0.361", "0.514",   // drink: hardest at tea
                                      "0.248", "0.503", "0.248"};  // tea
inline constexpr const char* out[] = {"0.875", "0.486", "0.486", "0.875", "0.752", "0.752"};
}  // namespace w3

// W4: the softmax's largest slope |∂α_i/∂s_j| on the raw scores (16, 8, 0) and the scaled
// scores (4, 2, 0).
namespace w4 {
inline constexpr const char* raw_slope = "0.00034";  // 5 decimals: the raw one is that small
inline constexpr const char* scaled_slope = "0.115";
}  // namespace w4

// W5: "bank" half water, half money; "river" all water, "loan" all money (Q = K = V = X).
namespace w5 {
inline constexpr attn::Matrix<double, 2, 2> river_bank{{2, 0}, {1, 1}};
inline constexpr attn::Matrix<double, 2, 2> bank_loan{{1, 1}, {0, 2}};
inline constexpr const char* river_bank_map[] = {"0.804", "0.196", "0.500", "0.500"};
inline constexpr const char* bank_loan_map[] = {"0.500", "0.500", "0.196", "0.804"};
inline constexpr const char* river_bank_out[] = {"1.804", "0.196", "1.500", "0.500"};
inline constexpr const char* bank_loan_out[] = {"0.500", "1.500", "0.196", "1.804"};
inline constexpr const char* banks_apart = "1.414";  // |bank's output in one − in the other|
}  // namespace w5

// W7: two heads of d_k = d_v = 3 on "I drink tea", weights constructed (no mask). Head 1's
// query of word t is 5·(word t − 1), so it finds the word before; head 2's is 5·(word t), so it
// finds the word itself. Every key and value is the word itself; W_O averages the two heads.
namespace w7 {
inline constexpr attn::Matrix<double, 3, 6> W_Q{{0, 0, 0, 5, 0, 0}, {5, 0, 0, 0, 5, 0}, {0, 5, 0, 0, 0, 5}};
inline constexpr attn::Matrix<double, 3, 6> W_K{{1, 0, 0, 1, 0, 0}, {0, 1, 0, 0, 1, 0}, {0, 0, 1, 0, 0, 1}};
inline constexpr attn::Matrix<double, 3, 6> W_V = W_K;
inline constexpr attn::Matrix<double, 6, 3> W_O{{0.5, 0, 0}, {0, 0.5, 0}, {0, 0, 0.5},
                                                {0.5, 0, 0}, {0, 0.5, 0}, {0, 0, 0.5}};
inline constexpr const char* before_map[] = {"0.333", "0.333", "0.333",  // "I": no word before
                                             "0.900", "0.050", "0.050",
                                             "0.050", "0.900", "0.050"};
inline constexpr const char* itself_map[] = {"0.900", "0.050", "0.050",
                                             "0.050", "0.900", "0.050",
                                             "0.050", "0.050", "0.900"};
inline constexpr const char* out[] = {"0.617", "0.192", "0.192",
                                      "0.475", "0.475", "0.050",
                                      "0.050", "0.475", "0.475"};
}  // namespace w7

// W9: one block on "I drink tea": W3's head, W_O back to 3 numbers, a feed-forward layer of 4
// hidden units of GELU (no biases; LayerNorm's γ = 1, β = 0, ε = 1e-5). transformer_block.cpp
// and attn-calc --block use these.
namespace w9 {
inline constexpr attn::Matrix<double, 2, 3> W_O{{1, 0, 0.5}, {0, 1, 0.5}};
inline constexpr attn::Matrix<double, 3, 4> W_1{{1, -1, 0.5, 0}, {0, 1, -0.5, 1}, {0.5, 0, 1, -1}};
inline constexpr attn::Matrix<double, 4, 3> W_2{{0.5, 0, 0}, {0, 0.5, 0}, {0, 0, 0.5}, {0.25, 0.25, 0.25}};
}  // namespace w9

// W10: "I drink green tea", each word's vector its own direction among the 5 words of the
// vocabulary (W_Q = W_K = W_V = I), causal; logits = Y W_vocab, W_vocab giving 3 to the word that
// follows each word in the sentence. Targets: the next words, "drink green tea .".
namespace w10 {
inline constexpr std::size_t vocabulary = 5;
inline constexpr const char* words[vocabulary] = {"I", "drink", "green", "tea", "."};
inline constexpr std::size_t inputs[4] = {0, 1, 2, 3};
inline constexpr std::size_t targets[4] = {1, 2, 3, 4};
inline constexpr double follows = 3;  // W_vocab(w, next word after w)
inline constexpr const char* map[] = {"1.000", "0.000", "0.000", "0.000",
                                      "0.390", "0.610", "0.000", "0.000",
                                      "0.281", "0.281", "0.439", "0.000",
                                      "0.219", "0.219", "0.219", "0.343"};
inline constexpr const char* losses[] = {"0.182", "0.692", "1.023", "1.232"};
inline constexpr const char* mean_loss = "0.782";
// Without the mask, position 1's loss before and after word 4 changes to "I" (it sees word 4).
inline constexpr const char* open_loss_1[] = {"1.232", "0.640"};
}  // namespace w10

// W11: the Hindi side is E3's decoder states (examples/alignment_map.cpp chose them); the
// decoder's self-attention over them (Q = K = V = X, causal) and the cross-attention whose
// queries they are, over "I drink tea" (W = I, scale 1: E3's plain dot). The encoder is W3.
namespace w11 {
inline constexpr attn::Matrix<double, 4, 3> hindi{{2, 0.5, 0}, {0, 0.5, 2}, {0, 2, 0.5}, {1.5, 1.5, 0}};
inline constexpr const char* decoder_map[] = {"1.000", "0.000", "0.000", "0.000",
                                              "0.090", "0.910", "0.000", "0.000",
                                              "0.107", "0.191", "0.701", "0.000",
                                              "0.297", "0.053", "0.193", "0.458"};
inline constexpr const char* cross_map[] = {"0.736", "0.164", "0.100",
                                            "0.100", "0.164", "0.736",  // चाय: E1's row
                                            "0.100", "0.736", "0.164",
                                            "0.450", "0.450", "0.100"};
}  // namespace w11

// W12: the map's price per head at three lengths (T = n), float, d = 64 per head for Q, K, V, Y.
namespace w12 {
inline constexpr std::size_t lengths[] = {256, 1024, 4096};
inline constexpr std::size_t d = 64;
inline constexpr const char* scores[] = {"65536", "1048576", "16777216"};
inline constexpr const char* map_mib[] = {"0.25", "4.00", "64.00"};
inline constexpr const char* causal_scores[] = {"32896", "524800", "8390656"};
inline constexpr const char* qkvy_mib[] = {"0.25", "1.00", "4.00"};
inline constexpr const char* logsumexp_kib[] = {"1", "4", "16"};
inline constexpr const char* tiled_output_kib = "260";  // Y and L at T = 1024: all the tiled form writes
}  // namespace w12

}  // namespace worked
