// Package slurmtest runs casestudy through a real one-node Slurm cluster
// (scripts/slurm-test-cluster.sh): trials as srun steps inside an allocation,
// faults and time limits from Slurm's view, and --submit as a batch job. It
// holds tests only.
package slurmtest
