/* SPDX-License-Identifier: Apache-2.0 */
/* gpuq_version.h - the project's version, as gpuqd --version and gpuqctl
 * --version print it. Kept equal to CMakeLists.txt's project(VERSION) (a
 * test, test_e2e_help, compares them). */
#ifndef GPUQ_PROTO_GPUQ_VERSION_H
#define GPUQ_PROTO_GPUQ_VERSION_H

#define GPUQ_VERSION "0.1.0"

#endif
