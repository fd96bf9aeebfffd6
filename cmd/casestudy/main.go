// Command casestudy runs declarative tuning studies of multi-GPU training
// (ResNet-50, BERT, GPT) and reports what made them fast.
package main

import (
	"os"
)

func main() { os.Exit(runMain(os.Args[1:], os.Stdout, os.Stderr)) }
