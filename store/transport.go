package store

// NCCLTransport is what NCCL's init lines (NCCL_DEBUG=INFO, subsystems INIT
// and NET) say about one rank's connections to its peers: how many channel
// connections went over each transport. Written by provenance.ParseNCCLTransport.
type NCCLTransport struct {
	// Connections counts channel connections by transport: P2P/CUMEM,
	// P2P/IPC, P2P/direct (intra-node peer-to-peer, NVLink or PCIe), SHM
	// (intra-node through host memory), NET/IB, NET/Socket (between nodes).
	Connections map[string]int `json:"connections"`
	// GDR is the NET connections that use GPUDirect RDMA (.../GDRDMA).
	GDR int `json:"gdr,omitempty"`
	// Network is the network NCCL chose ("Using network IB"), "" when absent.
	Network string `json:"network,omitempty"`
}
