// What the instance daemon needs to know about a program's collectives, read from and written
// into its serialized HloModuleProto (no protobuf library).
//
// torch-xla lowers some collectives differently on each rank (xm.all_gather, and so
// xm.rendezvous, xm.mesh_reduce and xm.save, pad the rank's slice into place, then all-reduce),
// so the ranks' programs differ while their collectives correspond one to one, as on Trainium,
// where the runtime matches collectives by their order. XLA's CPU engine matches the
// collectives of separately compiled programs only when they carry the same channel id.
#pragma once

#include <string>

#include "hlo/module_view.h"

namespace pjrt_neuron::hlo {

// The module with a channel id on every all-reduce, all-gather and reduce-scatter that lacks
// one, numbered in program order. Only for programs of one partition: there, a channel id does
// not change which devices take part. Unchanged when malformed or when nothing lacks one.
std::string WithCollectiveChannels(const std::string& module);
std::string WithCollectiveChannels(const ModuleView& module);

// Whether any computation of the program has a collective instruction (any all-reduce,
// all-gather, reduce-scatter, all-to-all, collective-permute or collective-broadcast, their
// async starts and dones included), read from the instructions' opcodes. `format` is "hlo" or
// "hlo_with_config"; for any other format, or a malformed module, true: the caller must then
// treat the program as one whose cores meet.
bool HasCollectives(const std::string& program, const std::string& format);
bool HasCollectives(const ModuleView& module);

// Whether the program computes the same on every core it runs on: no collective (as above) and
// no replica-id or partition-id. False for any other format or a malformed module.
bool RunsAlikeOnEveryCore(const std::string& program, const std::string& format);
bool RunsAlikeOnEveryCore(const ModuleView& module);

// The program's collectives in order (opcode, result shape, channel id), equal for the
// programs of different ranks whose collectives correspond. Empty, and `matchable` false, when
// some collective has no channel id (XLA could not match it across programs) or the module is
// malformed.
// `format` is "hlo" (an HloModuleProto) or "hlo_with_config" (an HloModuleProtoWithConfig).
std::string CollectiveSignature(const std::string& program, const std::string& format, bool* matchable);
std::string CollectiveSignature(const ModuleView& module, bool* matchable);

}  // namespace pjrt_neuron::hlo
