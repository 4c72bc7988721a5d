/* cmd_plan.c - `mkshards plan`: the trainer's memory planner (train/plan.c)
 * from the shard tool. Same options as `llmtrain --plan`; exits 0 when the
 * configuration fits, 3 when it cannot (with the reasons and what would make
 * it fit). */
#include "cli.h"
#include "tr.h"

int cmd_plan(int argc, char **argv) { return tr_plan_cli_main("mkshards plan", argc, argv); }
