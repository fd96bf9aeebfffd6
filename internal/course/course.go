// Package course names the chapters of the course casestudy follows: 30
// chapters on multi-GPU CUDA programming, from topology and streams to NCCL
// tuning, data and pipeline parallelism, mixed precision, CUDA Graphs and
// best practices. Knobs and checklist rules cite the chapter that explains
// them; docs/course.md lists the chapters and what casestudy takes from each.
package course

import "fmt"

var topics = [...]string{
	1: "multi-GPU basics and topology", 2: "streams", 3: "events and synchronisation",
	4: "peer-to-peer access", 5: "NCCL basics", 6: "NCCL tuning", 7: "CUDA-aware MPI",
	8: "multi-GPU memory", 9: "kernel launch and MPS", 10: "barriers", 11: "data parallelism",
	12: "model parallelism", 13: "pipeline parallelism", 14: "topology-aware mapping",
	15: "bandwidth and overlap", 16: "latency hiding", 17: "profiling", 18: "debugging",
	19: "error handling", 20: "load balancing", 21: "multi-node", 22: "frameworks",
	23: "mixed precision", 24: "gradient compression", 25: "asynchronous execution",
	26: "persistent threads", 27: "CUDA Graphs", 28: "dynamic parallelism", 29: "case studies",
	30: "best practices",
}

// Chapters is the number of chapters.
const Chapters = len(topics) - 1

// Topic is chapter n's topic ("mixed precision"), "" when n is not a chapter.
func Topic(n int) string {
	if n < 1 || n > Chapters {
		return ""
	}
	return topics[n]
}

// Cite is "chapter 23, mixed precision", "" when n is not a chapter.
func Cite(n int) string {
	if Topic(n) == "" {
		return ""
	}
	return fmt.Sprintf("chapter %d, %s", n, topics[n])
}
