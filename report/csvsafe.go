package report

import (
	"strconv"
	"strings"
)

// csvSafe neutralises a CSV row for spreadsheets (audit N18, A-9): a text
// cell that starts with =, +, -, @, a tab or a carriage return would be read
// as a formula (=HYPERLINK(...), @SUM(...)); it gets a leading apostrophe,
// which spreadsheets show as text. Numbers (-0.5, 1e-3) stay numbers.
func csvSafe(row []string) []string {
	for i, c := range row {
		if c == "" || !strings.ContainsRune("=+-@\t\r", rune(c[0])) {
			continue
		}
		if _, err := strconv.ParseFloat(c, 64); err == nil {
			continue
		}
		row[i] = "'" + c
	}
	return row
}
