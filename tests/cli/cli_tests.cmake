# attn-calc's tests; included by examples/CMakeLists.txt, where the attn-calc target is made.
#   attn_calc_golden_<format>  the unit's example (with --jacobian where the format shows it),
#                              byte for byte (tests/golden/)
#   attn_calc_golden_<name>    --steps (E1, E5), --no-attention, --map-only, a mask in every format, no
#                              arguments (README line 1), --self (W3, W7's two heads), --head-labels,
#                              per-row and causal masks, --dot-vs-scaled (W4), --beta-sweep (E2),
#                              --cross with projections and biases, --loss-curve (a training log)
#   attn_calc_golden_lesson_*  --pe, --rope, --layer-norm, --rms-norm, --activations, --block, --no-peeking in
#                              every format each has
#   attn_calc_from_files       the same map from @file inputs and labels (queries.csv has a
#                              byte-order mark, CRLF, a comment with ';', tabs and spaces)
#   attn_calc_docs_svg         docs/alignment_map.svg is what attn-calc draws now
#   example_alignment_map_svg  ... and what the alignment_map example draws
#   attn_calc_output_file      --output FILE: written whole; a failed run leaves FILE as it was
#   attn_calc_bad_<case>       bad input: exit code 2 and one line on stderr naming the problem
#   attn_calc_outputs_parse    every format read back by Python's parsers (skipped without python3)
#   attn_calc_latex_compiles   the LaTeX through pdflatex, labels as typed (skipped without it)
set(attn_cli_dir "${PROJECT_SOURCE_DIR}/tests/cli")
set(attn_golden_dir "${PROJECT_SOURCE_DIR}/tests/golden")
set(attn_cli_out "${CMAKE_CURRENT_BINARY_DIR}/cli_out")
file(MAKE_DIRECTORY "${attn_cli_out}")

foreach(pair text:txt md:md latex:tex json:json csv:csv csv-long:long.csv svg:svg)
  string(REPLACE ":" ";" pair "${pair}")
  list(GET pair 0 format)
  list(GET pair 1 ext)
  set(jacobian "|--jacobian")  # the formats that show it
  if(format MATCHES "csv|svg")
    set(jacobian "")
  endif()
  add_test(NAME attn_calc_golden_${format}
    COMMAND "${CMAKE_COMMAND}" "-DRUN=$<TARGET_FILE:attn-calc>${jacobian}|--format|${format}" -DCAPTURE=ON
            "-DOUT=${attn_cli_out}/unit_example.${ext}" "-DGOLDEN=${attn_golden_dir}/unit_example.${ext}"
            -P "${attn_cli_dir}/golden.cmake")
endforeach()
# attn_calc_golden(<name> <golden file> <arg>...): attn-calc <arg>... gives the golden file
function(attn_calc_golden name golden)
  list(JOIN ARGN "|" args)
  add_test(NAME attn_calc_golden_${name}
    COMMAND "${CMAKE_COMMAND}" "-DRUN=$<TARGET_FILE:attn-calc>|${args}" -DCAPTURE=ON
            "-DOUT=${attn_cli_out}/${golden}" "-DGOLDEN=${attn_golden_dir}/${golden}" -P "${attn_cli_dir}/golden.cmake")
endfunction()
attn_calc_golden(e1_steps e1_steps.txt --q 0,0.5,2 --query-labels चाय --steps)
attn_calc_golden(e5_steps e5_steps.md --score additive --steps --format md)
attn_calc_golden(e3_no_attention e3_no_attention.txt --no-attention)
attn_calc_golden(map_only_md map_only.md --format md --map-only)
attn_calc_golden(map_only_latex map_only.tex --format latex --map-only)
attn_calc_golden(masked_svg masked.svg --format svg --mask 1,1,0)
# a masked weight has one marker per format, apart from a weight that prints as 0.000: — in text
# and md, --- in latex, an empty field in csv and csv-long, null among json's rounded weights
# (β = 40 makes हूँ's weight on tea 0.000 without a mask, beside the masked one)
foreach(pair text:txt md:md latex:tex json:json csv:csv csv-long:long.csv)
  string(REPLACE ":" ";" pair "${pair}")
  list(GET pair 0 format)
  list(GET pair 1 ext)
  attn_calc_golden(masked_${format} masked.${ext} --mask 0,1,1 --beta 40 --format ${format})
endforeach()
attn_calc_golden(quick_start quick_start.txt)  # README line 1: attn-calc with no arguments
# --beta-sweep (E2: चाय's shares as β moves) in every format; a masked note is left out of the chart
foreach(pair text:txt md:md latex:tex json:json csv:csv csv-long:long.csv svg:svg)
  string(REPLACE ":" ";" pair "${pair}")
  list(GET pair 0 format)
  list(GET pair 1 ext)
  attn_calc_golden(e2_beta_sweep_${format} e2_beta_sweep.${ext} --beta-sweep 0:4:0.25 --format ${format})
endforeach()
attn_calc_golden(beta_sweep_masked_svg beta_sweep_masked.svg --q 1,0.5,0 --mask 1,0,1 --beta-sweep 0,0.5,1,2,4,8
                 --format svg)
# --self (W3: one head; W7: two heads and W_O), per-row masks, --dot-vs-scaled (W4), every format
set(w3 --self @${attn_cli_dir}/i_drink_tea.csv --words I,drink,tea --wq @${attn_cli_dir}/w3_wq.csv
       --wk @${attn_cli_dir}/w3_wk.csv --wv @${attn_cli_dir}/w3_wv.csv)
set(w7 --self @${attn_cli_dir}/i_drink_tea.csv --words I,drink,tea --heads 2 --wq @${attn_cli_dir}/w7_wq.csv
       --wk @${attn_cli_dir}/w7_wkv.csv --wv @${attn_cli_dir}/w7_wkv.csv --wo @${attn_cli_dir}/w7_wo.csv)
set(w4 --q @${attn_cli_dir}/w4_query.csv --notes @${attn_cli_dir}/w4_keys.csv --note-labels "ones,halves,zeros"
       --dot-vs-scaled)
attn_calc_golden(self_w3_text self_w3.txt ${w3})
attn_calc_golden(self_w3_json self_w3.json ${w3} --format json)
attn_calc_golden(self_w3_causal_svg self_w3_causal.svg ${w3} --mask causal --format svg)
attn_calc_golden(self_w3_mask_matrix_md self_w3_mask_matrix.md ${w3} --mask @${attn_cli_dir}/w3_mask.txt --mask causal
                 --format md)
attn_calc_golden(self_w7_md self_w7.md ${w7} --format md)
attn_calc_golden(self_w7_latex self_w7.tex ${w7} --format latex)
attn_calc_golden(self_w7_json self_w7.json ${w7} --format json)
attn_calc_golden(self_w7_csv self_w7.csv ${w7} --format csv)
attn_calc_golden(self_w7_csv_long self_w7.long.csv ${w7} --format csv-long)
attn_calc_golden(self_w7_svg self_w7.svg ${w7} --format svg)
attn_calc_golden(self_w7_map_only_latex self_w7_map_only.tex ${w7} --mask causal --format latex --map-only)
attn_calc_golden(self_w7_dot_vs_scaled_svg self_w7_dot_vs_scaled.svg ${w7} --dot-vs-scaled --format svg)
# --head-labels names the heads' panels (and their tables)
attn_calc_golden(self_w7_head_labels_svg self_w7_head_labels.svg ${w7} --head-labels "looks back,looks at itself"
                 --format svg)
attn_calc_golden(self_w7_head_labels_md self_w7_head_labels.md ${w7} --head-labels "looks back,looks at itself"
                 --format md --map-only)
# --cross: the decoder's states (d_q = 2) reading "I drink tea" (d_kv = 3) with W3's W_K and W_V,
# a W_Q of its own and biases
set(cross --q @${attn_cli_dir}/cross_queries.csv --cross @${attn_cli_dir}/i_drink_tea.csv
          --query-labels "मैं,चाय,पीता,हूँ" --note-labels I,drink,tea --wq @${attn_cli_dir}/cross_wq.csv
          --wk @${attn_cli_dir}/w3_wk.csv --wv @${attn_cli_dir}/w3_wv.csv --bq 0.5,0 --bv 0,-0.25)
attn_calc_golden(cross_text cross.txt ${cross})
attn_calc_golden(cross_json cross.json ${cross} --format json)
attn_calc_golden(cross_svg cross.svg ${cross} --format svg)
attn_calc_golden(w4_dot_vs_scaled_text w4_dot_vs_scaled.txt ${w4} --decimals 5)
attn_calc_golden(w4_dot_vs_scaled_svg w4_dot_vs_scaled.svg ${w4} --format svg)
attn_calc_golden(w4_dot_vs_scaled_json w4_dot_vs_scaled.json ${w4} --format json)
attn_calc_golden(cache_causal_text cache_causal.txt --q @${attn_cli_dir}/cache_queries.csv
                 --notes @${attn_cli_dir}/cache_notes.csv --mask causal --steps)
# The lessons of §8–§9 (--pe, --rope, --layer-norm, --rms-norm, --activations, --block), each in
# every format it has (svg for --pe and --rope); --steps in the documents. Their numbers are held
# to long-double formulas in test_attn_calc.cpp; these hold the layout.
foreach(pair text:txt md:md latex:tex json:json csv:csv csv-long:long.csv svg:svg)
  string(REPLACE ":" ";" pair "${pair}")
  list(GET pair 0 format)
  list(GET pair 1 ext)
  set(steps "")
  if(format MATCHES "text|md|latex")
    set(steps --steps)
  endif()
  attn_calc_golden(lesson_pe_${format} lesson_pe.${ext} --pe --positions 8 --dim 6 ${steps} --format ${format})
  attn_calc_golden(lesson_rope_${format} lesson_rope.${ext} --rope 1,0.5 --position 3 --pair 1 ${steps} --format ${format})
  if(NOT format STREQUAL "svg")
    attn_calc_golden(lesson_layer_norm_${format} lesson_layer_norm.${ext} --layer-norm @${attn_cli_dir}/layer_norm_rows.csv
                     --ln-gamma 1,1,2,2 --ln-beta 0,0,1,-1 --eps 0 ${steps} --format ${format})
    attn_calc_golden(lesson_activations_${format} lesson_activations.${ext} --activations -3,-1,0,1,3 ${steps}
                     --decimals 4 --format ${format})
    attn_calc_golden(lesson_block_${format} lesson_block.${ext} --block --format ${format})
    attn_calc_golden(lesson_no_peeking_${format} lesson_no_peeking.${ext} --no-peeking --format ${format})
  endif()
endforeach()
# --loss-curve: a training log (loss_log.csv: step,loss,tokens_per_second, a comment line) in every
# format, ln V with --vocabulary; a log with a run column (loss_runs.csv), a line per run, and two
# files at once (a column only one of them has is empty in the other's CSV rows)
foreach(pair text:txt md:md latex:tex json:json csv:csv csv-long:long.csv svg:svg)
  string(REPLACE ":" ";" pair "${pair}")
  list(GET pair 0 format)
  list(GET pair 1 ext)
  attn_calc_golden(loss_curve_${format} loss_curve.${ext} --loss-curve ${attn_cli_dir}/loss_log.csv --vocabulary 76
                   --format ${format})
endforeach()
attn_calc_golden(loss_runs_svg loss_runs.svg --loss-curve ${attn_cli_dir}/loss_runs.csv --vocabulary 5 --format svg)
attn_calc_golden(loss_two_files_csv loss_two_files.csv --loss-curve ${attn_cli_dir}/loss_log.csv
                 --loss-curve ${attn_cli_dir}/loss_runs.csv --format csv)
attn_calc_golden(lesson_pe_concatenated_svg lesson_pe_concatenated.svg --pe --layout concatenated --positions 8 --dim 6
                 --format svg)
attn_calc_golden(lesson_rope_half_split_text lesson_rope_half_split.txt --rope 1,0.5 --position 3 --pair 1
                 --layout half-split --steps)
attn_calc_golden(lesson_rms_norm_text lesson_rms_norm.txt --rms-norm 1,2,3,4 --steps)
attn_calc_golden(lesson_block_pre_ln_md lesson_block_pre_ln.md --block --pre-ln --format md)
# --ffn-activation: ReLU and GELU's tanh form in W9's block (the lesson page's activation choice)
attn_calc_golden(lesson_block_relu_json lesson_block_relu.json --block --ffn-activation relu --format json)
attn_calc_golden(lesson_block_gelu_tanh_pre_ln_md lesson_block_gelu_tanh_pre_ln.md --block --pre-ln --ffn-activation gelu-tanh
                 --format md)
# the tiny model's forward (--model, examples/attn_calc/model_walk.hpp): every format, --steps in the
# documents and JSON; the numbers are held to a long-double forward in test_attn_calc.cpp
foreach(pair text:txt md:md latex:tex json:json csv:csv csv-long:long.csv svg:svg)
  string(REPLACE ":" ";" pair "${pair}")
  list(GET pair 0 format)
  list(GET pair 1 ext)
  set(steps "")
  if(format MATCHES "text|md|latex|json")
    set(steps --steps)
  endif()
  attn_calc_golden(model_${format} model.${ext} --model ${steps} --format ${format})
endforeach()
attn_calc_golden(model_words_seed_text model_words_seed.txt --model --words the,cat,sat,on,the,mat --seed 7)
# a block of one's own: W7's two heads and W_O on "I drink tea", W9's feed-forward layer from files
attn_calc_golden(lesson_block_w7_md lesson_block_w7.md ${w7} --block --ffn-w1 @${attn_cli_dir}/w9_w1.csv
                 --ffn-w2 @${attn_cli_dir}/w9_w2.csv --format md)
add_test(NAME attn_calc_from_files
  COMMAND "${CMAKE_COMMAND}"
          "-DRUN=$<TARGET_FILE:attn-calc>|--q|@${attn_cli_dir}/queries.csv|--notes|@${attn_cli_dir}/notes.csv|--query-labels|@${attn_cli_dir}/words.txt|--note-labels|I,drink,tea|--format|csv"
          -DCAPTURE=ON "-DOUT=${attn_cli_out}/from_files.csv" "-DGOLDEN=${attn_golden_dir}/unit_example.csv"
          -P "${attn_cli_dir}/golden.cmake")
add_test(NAME attn_calc_docs_svg
  COMMAND "${CMAKE_COMMAND}" "-DRUN=$<TARGET_FILE:attn-calc>|--format|svg" -DCAPTURE=ON
          "-DOUT=${attn_cli_out}/alignment_map.svg" "-DGOLDEN=${PROJECT_SOURCE_DIR}/docs/alignment_map.svg"
          -P "${attn_cli_dir}/golden.cmake")
if(TARGET example_alignment_map)
  add_test(NAME example_alignment_map_svg
    COMMAND "${CMAKE_COMMAND}" "-DRUN=$<TARGET_FILE:example_alignment_map>|${attn_cli_out}/example_map.svg"
            "-DOUT=${attn_cli_out}/example_map.svg" "-DGOLDEN=${PROJECT_SOURCE_DIR}/docs/alignment_map.svg"
            -P "${attn_cli_dir}/golden.cmake")
endif()
add_test(NAME attn_calc_output_file
  COMMAND "${CMAKE_COMMAND}" "-DCALC=$<TARGET_FILE:attn-calc>" "-DWORK=${attn_cli_out}/output_file"
          "-DGOLDEN=${attn_golden_dir}/unit_example.svg" -P "${attn_cli_dir}/output_file.cmake")

# attn_calc_bad(<name> <expected text on stderr> <arg>...)
function(attn_calc_bad name expect)
  list(JOIN ARGN "|" args)
  add_test(NAME attn_calc_bad_${name}
    COMMAND "${CMAKE_COMMAND}" "-DCALC=$<TARGET_FILE:attn-calc>" "-DARGS=${args}" "-DEXPECT=${expect}"
            -P "${attn_cli_dir}/bad_input.cmake")
endfunction()
attn_calc_bad(malformed_number "\"abc\" is not a number" --q 0,abc,2)
attn_calc_bad(trailing_garbage "\"2x\" is not a number" --beta 2x)
attn_calc_bad(empty_field "a number is missing" --q 0,,2)
attn_calc_bad(out_of_range "out of the range of a double" --beta 1e999)
attn_calc_bad(nan "\"nan\" is not a finite number" --q nan,0,0)
attn_calc_bad(inf "\"inf\" is not a finite number" --beta inf)
attn_calc_bad(overflow "are not finite" --q 1e200,0,0 --notes 1e200,0,0)
attn_calc_bad(dot_sizes "needs the same length" --q 0,1)
attn_calc_bad(general_sizes "--W is 1x3 but --score general needs" --score general --q 1,2 --W 1,0,0 --notes 1,0,0)
attn_calc_bad(additive_sizes "--W1 has 3 columns but each note has 2" --score additive --q 1,2 --notes 1,0
              --W1 1,0,0 --W2 1,0 --v 1)
attn_calc_bad(additive_missing "--score additive needs --W1, --W2 and --v" --score additive --W1 1,0)
attn_calc_bad(general_missing "--score general needs --W" --score general)
attn_calc_bad(unused_parameter "--W is only used by --score general" --W 1,0,0)
attn_calc_bad(ragged "ragged.csv), line 2: row 2 has 2 numbers but row 1 (line 1) has 3" --q 1,0,0 --notes @${attn_cli_dir}/ragged.csv)
attn_calc_bad(empty_notes "--notes: no numbers given" --q 1,0,0 --notes=)
attn_calc_bad(empty_file "no numbers given" --q 1,0,0 --notes @${attn_cli_dir}/empty.csv)
attn_calc_bad(missing_file "cannot read the file" --q 1,0,0 --notes @${attn_cli_dir}/no_such_file.csv)
attn_calc_bad(directory "is a directory, not a file" --q 1,0,0 --notes @${attn_cli_dir})
attn_calc_bad(notes_without_q "--notes needs --q" --notes 1,0,0)
attn_calc_bad(unknown_score "unknown score \"cosine\"" --score cosine)
attn_calc_bad(unknown_format "unknown format \"pdf\"" --format pdf)
attn_calc_bad(unknown_option "unknown option \"--frobnicate\"" --frobnicate)
attn_calc_bad(stray_argument "unexpected argument \"tea\"" tea)
attn_calc_bad(missing_value "--q needs a value" --q)
attn_calc_bad(given_twice "--beta is given twice" --beta 1 --beta 2)
attn_calc_bad(mask_size "--mask has 2 entries but there are 3 notes" --mask 1,0)
attn_calc_bad(mask_value "--mask: the entry in row 1, column 2 is 2; entries must be 1 (keep) or 0 (mask out)" --mask 1,2,0)
attn_calc_bad(mask_value_file "mask_two.txt), line 3: the entry in row 2, column 2 is 2; entries must be 1 (keep) or 0"
              ${w3} --mask @${attn_cli_dir}/mask_two.txt)
# ';' where ',' was meant, and a byte-order mark in the middle of a file (at its start it is skipped:
# attn_calc_from_files reads queries.csv, which starts with one)
attn_calc_bad(semicolon_q "(--q \"0;0.5;2\" is 3 rows of 1 number: ';' separates rows, ',' the numbers of a row; did you mean \"0,0.5,2\"?)"
              --q "0<semicolon>0.5<semicolon>2")
attn_calc_bad(semicolon_mask "--mask has 2 entries but there are 3 notes (--mask \"1;0\" is 2 rows of 1 number" --mask "1<semicolon>0")
attn_calc_bad(semicolon_labels "(label 1, \"I;drink;tea\", holds ';': labels are separated by ',')" --note-labels "I<semicolon>drink<semicolon>tea")
attn_calc_bad(bom_mid_file "bom_mid.csv), line 3: a byte-order mark (U+FEFF) in the middle of the file" --q 1,0,0
              --notes @${attn_cli_dir}/bom_mid.csv)
attn_calc_bad(bom_mid_labels "bom_mid.csv), line 3: a byte-order mark (U+FEFF) in the middle of the file"
              --query-labels @${attn_cli_dir}/bom_mid.csv)
attn_calc_bad(label_count "--note-labels gives 2 labels but there are 3 notes" --note-labels I,drink)
attn_calc_bad(empty_label "--query-labels: label 2 is empty" --q 1,0,0 --query-labels a,)
attn_calc_bad(decimals_range "--decimals: 40 is outside 0..17" --decimals 40)
attn_calc_bad(decimals_not_int "--decimals: \"2.5\" is not a whole number" --decimals 2.5)
attn_calc_bad(lesson_and_map "--pe prints its own numbers, not a map: leave out --q" --pe --q 1,0)
attn_calc_bad(two_lessons "--pe and --block are two lessons: give one at a time" --pe --block)
attn_calc_bad(lesson_option "--pair is for --rope" --pe --pair 1)
attn_calc_bad(block_ffn_sizes "--ffn-w2 has 3 rows but --ffn-w1 has 4 columns (one per hidden unit)" ${w7} --block
              --ffn-w1 @${attn_cli_dir}/w9_w1.csv --ffn-w2 @${attn_cli_dir}/i_drink_tea.csv)
# per-row masks, --self, --heads, --dot-vs-scaled
attn_calc_bad(mask_matrix_shape "--mask is 2x4: give one row of 3 entries (every query the same), 4 rows of 3 (one per query) or causal"
              --mask @${attn_cli_dir}/cache_queries.csv)
attn_calc_bad(causal_twice "--mask causal is given twice" --mask causal --mask causal)
attn_calc_bad(self_and_q "--self takes the queries, keys and values from the sentence: leave out --q"
              --self @${attn_cli_dir}/i_drink_tea.csv --q 1,0,0)
attn_calc_bad(wq_without_self "--wq needs --self (the sentence of self-attention)" --wq @${attn_cli_dir}/w3_wq.csv)
attn_calc_bad(wq_rows "--wq has 3 rows but each word of --self has 2 numbers" --self 1,0 --wq @${attn_cli_dir}/w3_wq.csv)
attn_calc_bad(wk_columns "--wk has 6 columns but --wq has 2 columns (the queries and the keys need the same size"
              --self @${attn_cli_dir}/i_drink_tea.csv --wq @${attn_cli_dir}/w3_wq.csv --wk @${attn_cli_dir}/w7_wkv.csv)
attn_calc_bad(heads_divide "--heads 2 does not divide the 3 columns of W_Q" --self @${attn_cli_dir}/i_drink_tea.csv
              --heads 2)
attn_calc_bad(wo_rows "--wo has 6 rows but --wv has 2 columns" --self @${attn_cli_dir}/i_drink_tea.csv
              --wq @${attn_cli_dir}/w3_wq.csv --wk @${attn_cli_dir}/w3_wk.csv --wv @${attn_cli_dir}/w3_wv.csv
              --wo @${attn_cli_dir}/w7_wo.csv)
attn_calc_bad(heads_range "--heads: 0 is outside 1..1024" --self @${attn_cli_dir}/i_drink_tea.csv --heads 0)
attn_calc_bad(words_count "--words gives 2 labels but there are 3 words" --self @${attn_cli_dir}/i_drink_tea.csv
              --words I,drink)
attn_calc_bad(self_score "--self scores with dot or scaled_dot (the default), not --score general"
              --self @${attn_cli_dir}/i_drink_tea.csv --score general)
attn_calc_bad(head_labels_count "--head-labels gives 3 labels but there are 2 heads" ${w7} --head-labels a,b,c)
attn_calc_bad(head_labels_one_head "--head-labels gives 2 labels but there is 1 head (--heads not given)"
              --self @${attn_cli_dir}/i_drink_tea.csv --head-labels a,b)
attn_calc_bad(head_labels_without_self "--head-labels needs --self" --head-labels a)
attn_calc_bad(sweep_queries "--beta-sweep follows one query's shares: give --q one row, not 2" --q "1,0,0<semicolon>0,1,0"
              --beta-sweep 0:2:1)
attn_calc_bad(sweep_and_beta "--beta-sweep shows one query's shares at every β: leave out --beta" --beta 2 --beta-sweep 0:2:1)
attn_calc_bad(sweep_spec "--beta-sweep: \"0:2\" is not LO:HI:STEP (e.g. 0:4:0.25) or values separated by ','"
              --beta-sweep 0:2)
attn_calc_bad(sweep_step "--beta-sweep: the STEP 0 is not above 0" --beta-sweep 0:2:0)
attn_calc_bad(sweep_too_many "is more than 1001 values of β" --beta-sweep 0:1:0.0001)
attn_calc_bad(cross_without_q "--cross needs --q (the queries, one per row, that read the sentence)"
              --cross @${attn_cli_dir}/i_drink_tea.csv)
attn_calc_bad(cross_wk_rows "--wk has 4 rows but each word of --cross has 3 numbers" --q 1,0 --cross @${attn_cli_dir}/i_drink_tea.csv
              --wq @${attn_cli_dir}/cross_wq.csv --wk "1,0<semicolon>0,1<semicolon>1,1<semicolon>0,0")
attn_calc_bad(bias_size "--bv has 3 numbers but W_V has 2 columns (a bias adds one number to each column)"
              --self @${attn_cli_dir}/i_drink_tea.csv --wq @${attn_cli_dir}/w3_wq.csv --wk @${attn_cli_dir}/w3_wk.csv
              --wv @${attn_cli_dir}/w3_wv.csv --bv 1,2,3)
attn_calc_bad(dot_vs_scaled_score "--dot-vs-scaled shows both dot and scaled_dot: leave out --score" --dot-vs-scaled
              --score dot)
# @files are read as lines; every message is one line of printable text, whatever the input held
attn_calc_bad(decimal_commas "decimal_commas.csv), line 1: a ';', which separates rows only on the command line"
              --q @${attn_cli_dir}/decimal_commas.csv)
attn_calc_bad(header_row "header.csv), line 1: \"I\" is not a number (a header row? start it with '#' to skip it)"
              --q 1,0,0 --notes @${attn_cli_dir}/header.csv)
attn_calc_bad(nul_in_file "nul.csv), line 2: a NUL byte (is this a text file?)" --q 1,0,0 --notes @${attn_cli_dir}/nul.csv)
attn_calc_bad(newline_in_value "--beta: \"2\\n3\" is not a number" --beta "2\n3")
# a training log's errors name the file, the line and the column
attn_calc_bad(loss_not_number "loss_not_number.csv), line 4, column loss: \"O.98\" is not a number"
              --loss-curve ${attn_cli_dir}/loss_not_number.csv)
attn_calc_bad(loss_no_column "loss_no_column.csv), line 1: the header \"step,los\" has no column \"loss\""
              --loss-curve ${attn_cli_dir}/loss_no_column.csv)
attn_calc_bad(loss_bom_mid "loss_bom_mid.csv), line 4: a byte-order mark (U+FEFF) in the middle of the file"
              --loss-curve ${attn_cli_dir}/loss_bom_mid.csv)
attn_calc_bad(loss_fields "loss_fields.csv), line 3: 2 fields, but the header (line 1) has 3 columns"
              --loss-curve ${attn_cli_dir}/loss_fields.csv)
attn_calc_bad(loss_order "loss_order.csv), line 4: step 10 does not follow step 10 (the steps of a run must increase)"
              --loss-curve ${attn_cli_dir}/loss_order.csv)
attn_calc_bad(vocabulary_alone "--vocabulary is for --loss-curve" --vocabulary 76)
attn_calc_bad(no_peeking_svg "--no-peeking prints tables: use text, md, latex, json, csv or csv-long" --no-peeking
              --format svg)
string(ASCII 27 attn_esc)
attn_calc_bad(escape_sequence "--beta: \"\\x1b[2J\\x1b[31mred\" is not a number" --beta "${attn_esc}[2J${attn_esc}[31mred")
string(REPEAT "1" 100000 attn_huge)
attn_calc_bad(huge_token "(100001 bytes) is not a number" --beta "${attn_huge}x")
if(EXISTS /dev/zero)
  attn_calc_bad(special_file "--notes: \"/dev/zero\" is not a regular file" --q 1,0,0 --notes @/dev/zero)
endif()

# Every format read back by a real parser: Python's (SVG, JSON, CSV, Markdown tables) and pdfLaTeX.
# Each is skipped, and says so, where its tool is not installed; CI does not need them.
find_package(Python3 COMPONENTS Interpreter QUIET)
if(Python3_Interpreter_FOUND)
  add_test(NAME attn_calc_outputs_parse
    COMMAND "${Python3_EXECUTABLE}" "${attn_cli_dir}/parse_outputs.py" $<TARGET_FILE:attn-calc> "${attn_cli_out}/parse")
else()
  add_test(NAME attn_calc_outputs_parse COMMAND "${CMAKE_COMMAND}" -E echo "SKIPPED: python3 was not found")
endif()
find_program(ATTN_PDFLATEX pdflatex)
find_program(ATTN_PDFTOTEXT pdftotext)
add_test(NAME attn_calc_latex_compiles
  COMMAND "${CMAKE_COMMAND}" "-DCALC=$<TARGET_FILE:attn-calc>" "-DCLI=${attn_cli_dir}" "-DWORK=${attn_cli_out}/latex"
          "-DPDFLATEX=${ATTN_PDFLATEX}" "-DPDFTOTEXT=${ATTN_PDFTOTEXT}" -P "${attn_cli_dir}/latex.cmake")
set_tests_properties(attn_calc_outputs_parse attn_calc_latex_compiles PROPERTIES SKIP_REGULAR_EXPRESSION "SKIPPED:")
