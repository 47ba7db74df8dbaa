// W11. Three families: BERT, GPT and the encoder–decoder (Unit 18, section 11).
// The same attention, three ways of wiring it:
//   - an encoder (BERT) reads a whole sentence: self-attention with no mask, every word sees
//     every word, the later ones too;
//   - a decoder (GPT) writes: self-attention under the causal mask, each word sees the words
//     before it and itself;
//   - an encoder–decoder (the translator of section 1, and the original transformer) adds
//     cross-attention: queries from the words being written, keys and values from the encoder's
//     notes. Section 1's alignment map is exactly that: E3's "I drink tea" → "मैं चाय पीता हूँ"
//     comes out of cross-attention number for number.
// The encoder here is W3's; the Hindi side is E3's four decoder states (examples/alignment_map.cpp
// chose them), with W = I. E3 scored with the plain dot, so the cross-attention takes scale 1
// (PyTorch's scale=) instead of 1/√d_k.

#include <cstdio>
#include <string>
#include <vector>

#include "attn/attn.hpp"
#include "unit_check.hpp"
#include "worked_examples.hpp"

int main() {
  using namespace worked;
  unit::checker check;
  const std::vector<std::string> english = {"I", "drink", "tea"};
  const std::vector<std::string> hindi = {"मैं", "चाय", "पीता", "हूँ"};
  const attn::Matrix<double, 3, 3> I{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};

  std::printf("W11. Three families on \"I drink tea\" → मैं चाय पीता हूँ\n\n");

  // 1. Encoder (BERT): no mask.
  const auto encoder = attn::self_attention(i_drink_tea, w3::W_Q, w3::W_K, w3::W_V);
  unit::show(unit::matrix_table(check, "1. Encoder (BERT): self-attention, no mask (W3)",
                                encoder.maps, english, english, w3::map, true));
  check.claim(encoder.maps(0, 2) > 0, "in the encoder, the first word sees a later one");

  // 2. Decoder (GPT): causal.
  const auto decoder = attn::self_attention(w11::hindi, I, I, I, attn::options{.causal = true});
  unit::show(unit::matrix_table(check, "2. Decoder (GPT): self-attention, causal", decoder.maps,
                                hindi, hindi, w11::decoder_map, true));
  for (std::size_t t = 0; t < 4; ++t)
    for (std::size_t j = t + 1; j < 4; ++j)
      check.claim(decoder.maps(t, j) == 0, "in the decoder, no word sees a later one");

  // 3. Encoder–decoder: cross-attention, queries from the Hindi side, keys and values English.
  attn::Matrix<double> Y(4, 3), map(4, 3);
  attn::multi_head_cache<double> cache;
  attn::multi_head_attention(
      w11::hindi, i_drink_tea,
      {.W_Q = attn::as_view(I), .W_K = attn::as_view(I), .W_V = attn::as_view(I), .score = attn::dot},
      {.out = Y.view(), .maps = map.view()}, cache);
  const auto table = unit::matrix_table(
      check, "3. Encoder–decoder: cross-attention (rows: Hindi written; columns: English read)",
      map, hindi, english, w11::cross_map, true);
  unit::show(table);

  // It is E3's map: E1's row for चाय, and attn::align over the same states and notes, to the bit.
  const char* unit_chai[] = {"0.100", "0.164", "0.736"};
  for (std::size_t j = 0; j < 3; ++j)
    check.print("चाय → " + english[j] + " (E1)", map(1, j), unit_chai[j]);
  const auto e3 = attn::align(w11::hindi, i_drink_tea, attn::dot);
  check.claim(e3.weights == attn::Matrix<double, 4, 3>(map.view()),
              "cross-attention's map is E3's alignment map, bit for bit");
  check.claim(e3.contexts == attn::Matrix<double, 4, 3>(Y.view()),
              "and its outputs are E3's context vectors");
  std::printf(
      "Row चाय is E1's (0.100, 0.164, 0.736), and the whole map equals E3's (attn::align) to the\n"
      "bit: section 1's translator was cross-attention all along. A full encoder–decoder also\n"
      "runs the decoder's causal self-attention (2.) before it asks the encoder (3.).\n");
  return check.finish();
}
