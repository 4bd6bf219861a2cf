// Command etcd runs a single-member etcd on loopback for koordpy's test control plane.
//
// It wraps go.etcd.io/etcd/server/v3/embed at the version the pinned Kubernetes release
// depends on, so one go.sum pins both. It is not a production etcd: one member, no TLS,
// 127.0.0.1 only.
package main

import (
	"flag"
	"fmt"
	"log"
	"net/url"
	"os"
	"os/signal"
	"syscall"

	"go.etcd.io/etcd/server/v3/embed"
)

func main() {
	dataDir := flag.String("data-dir", "", "data directory (required)")
	clientPort := flag.Int("client-port", 2379, "client port on 127.0.0.1")
	peerPort := flag.Int("peer-port", 2380, "peer port on 127.0.0.1")
	quotaBytes := flag.Int64("quota-backend-bytes", 2<<30, "backend size quota in bytes")
	flag.Parse()
	if *dataDir == "" {
		fmt.Fprintln(os.Stderr, "etcd: --data-dir is required")
		os.Exit(2)
	}

	cfg := embed.NewConfig()
	cfg.Name = "koordpy-test"
	cfg.Dir = *dataDir
	cfg.LogLevel = "warn"
	cfg.QuotaBackendBytes = *quotaBytes
	client := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", *clientPort)}
	peer := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", *peerPort)}
	cfg.ListenClientUrls = []url.URL{client}
	cfg.AdvertiseClientUrls = []url.URL{client}
	cfg.ListenPeerUrls = []url.URL{peer}
	cfg.AdvertisePeerUrls = []url.URL{peer}
	cfg.InitialCluster = fmt.Sprintf("%s=%s", cfg.Name, peer.String())

	server, err := embed.StartEtcd(cfg)
	if err != nil {
		log.Fatalf("etcd: start: %v", err)
	}
	defer server.Close()

	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	select {
	case <-server.Server.ReadyNotify():
		fmt.Fprintf(os.Stderr, "etcd: ready on %s\n", client.String())
	case err := <-server.Err():
		log.Fatalf("etcd: %v", err)
	case <-signals:
		return
	}
	select {
	case err := <-server.Err():
		log.Fatalf("etcd: %v", err)
	case <-signals:
	}
}
