// Package measure is what stats needs, read from stored records: a launch's
// value of the objective (LaunchValue) and a trial's clean launches
// (TrialLaunches, CleanLaunches), the best trial (Best), the run's design
// (DesignOf, DesignRecord), the steady-state check of a launch (Unsteady),
// its throughput over summed step times or the measured window
// (Throughput, WindowThroughput), its power-limit summary (ClockDeficit) and
// the per-launch and per-trial summaries the records keep (SummarizeRepeat,
// SummarizeTrial). It sits between store and stats in the data flow: it reads
// store's records and hands stats plain values; stats knows no storage type.
package measure
