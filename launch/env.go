package launch

import "strings"

// LookupEnv finds key in env ("KEY=value" entries) as a started process would
// see it: the last entry for key wins.
func LookupEnv(env []string, key string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], key+"="); ok {
			return v, true
		}
	}
	return "", false
}
