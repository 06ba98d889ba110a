package controllers

import (
	"fmt"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/seedops/etcd-operator/internal/etcd"
	"github.com/seedops/etcd-operator/internal/resources"
)

// Config is what the operator's controllers are configured with (cmd/main.go's flags).
type Config struct {
	Options resources.Options
	// HealAfter, HealthInterval and MaxConcurrentReconciles: see EtcdClusterReconciler.
	HealAfter               time.Duration
	HealthInterval          time.Duration
	MaxConcurrentReconciles int
	// EtcdTimeout bounds each call to etcd.
	EtcdTimeout time.Duration
}

// Setup registers the operator's controllers with the manager: one place, so the operator and the
// benchmark that runs it cannot drift apart.
func Setup(mgr ctrl.Manager, cfg Config) error {
	recorder := mgr.GetEventRecorder("etcd-operator")
	if err := (&EtcdClusterReconciler{
		Client:                  mgr.GetClient(),
		Scheme:                  mgr.GetScheme(),
		APIReader:               mgr.GetAPIReader(),
		Recorder:                recorder,
		Options:                 cfg.Options,
		Dialer:                  etcd.NewDialer(durationOr(cfg.EtcdTimeout, 5*time.Second)),
		HealAfter:               cfg.HealAfter,
		HealthInterval:          cfg.HealthInterval,
		MaxConcurrentReconciles: cfg.MaxConcurrentReconciles,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("EtcdCluster controller: %w", err)
	}
	if err := (&EtcdBackupReconciler{
		Client:   mgr.GetClient(),
		Scheme:   mgr.GetScheme(),
		Recorder: recorder,
		Options:  cfg.Options,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("EtcdBackup controller: %w", err)
	}
	return nil
}
