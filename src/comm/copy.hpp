// Copies between a rank's buffers and memory it shares, at memory's pace
// whatever the two addresses are.
#pragma once

#include <cstddef>

namespace cohort::detail {

/// Copies `bytes` from `from` to `to`, which do not overlap, as memcpy does.
/// Where `to` lies 1 to 31 bytes past `from` modulo a 4 KiB page, glibc's
/// memcpy (`rep movsb` from 2 KiB up to about the L2 cache's size) ran at
/// 1.7-1.8 GB/s on this project's AMD EPYC machine, against 21-45 GB/s at
/// other distances (32 to 63 bytes past: 21 GB/s; 2026-12-02): the CPU takes
/// the pages' offsets for an overlap. That is exactly a shared slot
/// (page-aligned) copied into a buffer from malloc (16 bytes past a page from
/// 128 KiB up). From 1 to 63 bytes past this copies with 16-byte vector moves
/// instead (26-29 GB/s there); elsewhere it is memcpy.
void copy_bytes(void* to, const void* from, std::size_t bytes) noexcept;

}  // namespace cohort::detail
