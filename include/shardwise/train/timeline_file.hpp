#pragma once
// A pipeline timeline read back from JSON: what `shardwise schedule --json` predicts and what
// a training job's timeline setting (`shardwise train --timeline`) measured, in one format
// (job_pipeline.hpp's timeline_json writes it), so `shardwise schedule --from` draws
// either and a user can put the plan and the run side by side.

#include <string>

#include "shardwise/strategy/pipeline_schedule.hpp"

namespace shardwise::train {

struct TimelineFile {
  PipelineSchedule schedule;
  // As read, in seconds (or the prediction's units).
  PipelineTimeline timeline;
  // The same in units of the median chunk forward pass, rounded, for the drawing.
  PipelineTimeline drawn;
  bool measured = false;
  double median_forward = 0;
  double median_backward = 0;
};

// Reads `text` (from the file `path`): the schedule's header (schedule, stages, microbatches,
// virtual_stages) and, per stage, its passes with their start and end. InvalidArgument naming
// the file and the field for anything else: a pass the schedule does not run at that place, a
// time that is negative, not finite, or ends before it starts.
TimelineFile read_timeline(const std::string& text, const std::string& path);

}  // namespace shardwise::train
