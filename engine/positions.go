package engine

// Positions is how many token positions a preset's position embedding has,
// the largest seq_len it trains (0 when the family has no sequence or the
// preset is unknown). Like Models it copies the library's presets
// (engine/native/src/gpt.cpp presets(), bert.cpp BertShape), so a study is
// checked without loading the library; the engine refuses the same values.
func Positions(family, preset string) int {
	switch family {
	case "gpt":
		switch preset {
		case "tiny":
			return 256
		case "124m", "350m", "774m", "1.5b":
			return 1024
		}
	case "bert":
		switch preset {
		case "tiny", "base", "large":
			return 512
		}
	}
	return 0
}
