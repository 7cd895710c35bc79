package main

import "context"

func cmdE2E(ctx context.Context, args []string) error     { return nil }
func cmdWake(ctx context.Context, args []string) error    { return nil }
func cmdIdle(ctx context.Context, args []string) error    { return nil }
func cmdCompare(ctx context.Context, args []string) error { return nil }
func cmdStorage(ctx context.Context, args []string) error { return nil }
func cmdChart(ctx context.Context, args []string) error   { return nil }
