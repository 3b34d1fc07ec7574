/* SPDX-License-Identifier: Apache-2.0 */
/* gen_header_raw.h - gen_corpus_header's hostile and other-encoding
 * inputs and its replies (into frames_corpus). */
#ifndef GPUQ_TESTS_FUZZ_GEN_HEADER_RAW_H
#define GPUQ_TESTS_FUZZ_GEN_HEADER_RAW_H

void gen_header_raw(void);

#endif
