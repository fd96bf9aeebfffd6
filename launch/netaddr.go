package launch

import (
	"fmt"
	"net"
	"strings"
)

// ReachableIP is the address other nodes reach this one at: the first address
// of the interface named iface, or with iface "" the first up, non-loopback
// interface's (IPv4 preferred). The runner's rendezvous listens there when
// ranks run on other nodes.
func ReachableIP(iface string) (string, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return "", fmt.Errorf("listing network interfaces: %w", err)
	}
	var names []string
	var v6 string
	for _, it := range ifs {
		names = append(names, it.Name)
		if iface != "" && it.Name != iface {
			continue
		}
		if iface == "" && (it.Flags&net.FlagUp == 0 || it.Flags&net.FlagLoopback != 0) {
			continue
		}
		addrs, err := it.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			ipn, ok := a.(*net.IPNet)
			if !ok || ipn.IP.IsLinkLocalUnicast() || ipn.IP.IsLinkLocalMulticast() {
				continue
			}
			if iface == "" && ipn.IP.IsLoopback() {
				continue
			}
			if ipn.IP.To4() != nil {
				return ipn.IP.String(), nil
			}
			if v6 == "" {
				v6 = ipn.IP.String()
			}
		}
		if iface != "" && v6 == "" {
			return "", fmt.Errorf("network interface %s has no usable address", iface)
		}
	}
	if v6 != "" {
		return v6, nil
	}
	if iface != "" {
		return "", fmt.Errorf("no network interface %s (this host has: %s)", iface, strings.Join(names, ", "))
	}
	return "", fmt.Errorf("no up, non-loopback network interface with an address (this host has: %s); give one with --rdzv-interface or --rdzv-addr",
		strings.Join(names, ", "))
}
