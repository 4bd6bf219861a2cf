{{/* Chart name, overridable. */}}
{{- define "koordpy.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Resource name prefix. Kubernetes names are DNS labels (63 characters); the longest component suffix
("-scheduler-extender-authn", 25 characters) must still fit, so the prefix is cut to 38.
*/}}
{{- define "koordpy.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 38 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 38 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 38 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "koordpy.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels on every object. */}}
{{- define "koordpy.labels" -}}
helm.sh/chart: {{ include "koordpy.chart" . }}
app.kubernetes.io/name: {{ include "koordpy.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Selector labels of one component: (dict "ctx" $ "component" "agent"). */}}
{{- define "koordpy.selectorLabels" -}}
app.kubernetes.io/name: {{ include "koordpy.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/* Labels of one component's objects: (dict "ctx" $ "component" "agent"). */}}
{{- define "koordpy.componentLabels" -}}
{{ include "koordpy.labels" .ctx }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/* The koordpy image reference; with image.digest, pinned to it (repository:tag@digest). */}}
{{- define "koordpy.image" -}}
{{- include "koordpy.imageRef" (dict "image" .Values.image "tag" (default .Chart.AppVersion .Values.image.tag)) }}
{{- end }}

{{/* kube-scheduler's image reference; with its digest, pinned to it. */}}
{{- define "koordpy.kubeSchedulerImage" -}}
{{- $image := .Values.scheduler.kubeScheduler.image }}
{{- include "koordpy.imageRef" (dict "image" $image "tag" $image.tag) }}
{{- end }}

{{/* repository:tag, or repository:tag@digest: (dict "image" <values with repository, digest> "tag" <tag>). The
tag stays beside a digest for people reading the manifest; the runtime pulls the digest. */}}
{{- define "koordpy.imageRef" -}}
{{- $ref := printf "%s:%s" .image.repository .tag }}
{{- with .image.digest }}
{{- if not (regexMatch "^sha256:[a-f0-9]{64}$" .) }}
{{- fail (printf "image digest %q is not sha256:<64 lowercase hex digits>" .) }}
{{- end }}
{{- $ref = printf "%s@%s" $ref . }}
{{- end }}
{{- $ref }}
{{- end }}

{{/* The Secret holding kube-scheduler's serving certificate (tls.crt, tls.key, ca.crt), or empty when
kube-scheduler serves the self-signed one it makes at start-up. */}}
{{- define "koordpy.scheduler.tlsSecret" -}}
{{- $tls := .Values.scheduler.kubeScheduler.tls }}
{{- if $tls.secretName }}{{ $tls.secretName }}
{{- else if $tls.certManager.enabled }}{{ include "koordpy.fullname" . }}-scheduler-tls
{{- end }}
{{- end }}

{{/* The scheduler Service's DNS name: the name kube-scheduler's serving certificate is issued for. */}}
{{- define "koordpy.scheduler.serviceName" -}}
{{- printf "%s-scheduler.%s.svc" (include "koordpy.fullname" .) .Release.Namespace }}
{{- end }}

{{/* Whether the Prometheus Operator's monitoring.coreos.com/v1 API is served (helm template: pass
--api-versions monitoring.coreos.com/v1). */}}
{{- define "koordpy.monitoringApi" -}}
{{- if .Capabilities.APIVersions.Has "monitoring.coreos.com/v1" }}true{{ end }}
{{- end }}

{{/* Labels of the helm test hook pods (the NetworkPolicies admit them to the health ports). */}}
{{- define "koordpy.testLabels" -}}
app.kubernetes.io/name: {{ include "koordpy.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: test
{{- end }}

{{/* The scheduler's configuration file, apiVersion and kind filled in; gang.requeueSignal names the
chart's CSIStorageCapacity (scheduler-requeue-signal.yaml) unless the values name one. */}}
{{- define "koordpy.scheduler.config" -}}
{{- $cfg := merge (deepCopy .Values.scheduler.config) (dict "apiVersion" "koordpy.io/v1alpha1" "kind" "SchedulerConfiguration") }}
{{- if include "koordpy.scheduler.requeueSignal" . }}
{{- $gang := default (dict) $cfg.gang }}
{{- $_ := set $gang "requeueSignal" (printf "%s/%s" .Release.Namespace (include "koordpy.scheduler.requeueSignal" .)) }}
{{- $_ := set $cfg "gang" $gang }}
{{- end }}
{{- toYaml $cfg }}
{{- end }}

{{/* The name of the chart's gang requeue signal (a CSIStorageCapacity the extender updates so that
kube-scheduler retries the gang members it parked); empty when the extender sends no retry requests
(config.gang.requeueQPS 0) or the values name a signal of their own (config.gang.requeueSignal). */}}
{{- define "koordpy.scheduler.requeueSignal" -}}
{{- $gang := .Values.scheduler.config.gang | default dict }}
{{- if and (or (not (hasKey $gang "requeueQPS")) (gt (float64 $gang.requeueQPS) 0.0)) (not $gang.requeueSignal) -}}
{{ include "koordpy.fullname" . }}-gang-requeue
{{- end }}
{{- end }}

{{/* kube-scheduler's httpTimeout for the binder extender entry, in seconds: the extender's
config.gang.binderHttpTimeoutSeconds (default 660), so the two can never disagree. */}}
{{- define "koordpy.scheduler.binderHttpTimeout" -}}
{{- dig "gang" "binderHttpTimeoutSeconds" 660 .Values.scheduler.config }}
{{- end }}

{{/* The kube-scheduler profile name: the extender's schedulerName, so both always agree. */}}
{{- define "koordpy.scheduler.profile" -}}
{{- dig "extender" "schedulerName" "koordpy-scheduler" .Values.scheduler.config }}
{{- end }}

{{/* The extender's loopback port, from its configuration file. */}}
{{- define "koordpy.scheduler.extenderPort" -}}
{{- dig "extender" "port" 10262 .Values.scheduler.config | int }}
{{- end }}

{{/* The extender's ops port (/healthz, /readyz, /metrics on the pod IP), from its configuration file;
empty when extender.metricsPort is unset (then the extender listens on loopback only). */}}
{{- define "koordpy.scheduler.metricsPort" -}}
{{- with dig "extender" "metricsPort" "" .Values.scheduler.config }}{{ int . }}{{ end }}
{{- end }}

{{/* The manager's configuration file, with its leader election's Lease in the release namespace, named
after the release (koordpy-manager for the release "koordpy"), unless the values name another. */}}
{{- define "koordpy.manager.config" -}}
{{- $cfg := merge (deepCopy .Values.manager.config) (dict "apiVersion" "koordpy.io/v1alpha1" "kind" "ManagerConfiguration") }}
{{- $election := default (dict) $cfg.leaderElection }}
{{- if not (hasKey $election "resourceName") }}
{{- $_ := set $election "resourceName" (printf "%s-manager" (include "koordpy.fullname" .)) }}
{{- end }}
{{- if not (hasKey $election "resourceNamespace") }}
{{- $_ := set $election "resourceNamespace" .Release.Namespace }}
{{- end }}
{{- $_ := set $cfg "leaderElection" $election }}
{{- /* only the koordpy-scheduler profile's pods can bind through a Reservation: they alone may starve */}}
{{- $reservation := default (dict) $cfg.reservation }}
{{- if not (hasKey $reservation "schedulerNames") }}
{{- $_ := set $reservation "schedulerNames" (list (include "koordpy.scheduler.profile" .)) }}
{{- $_ := set $cfg "reservation" $reservation }}
{{- end }}
{{- /* a ReservationFirst migration's Reservation is placed for the pod's scheduler: the profile's pods */}}
{{- $migration := default (dict) $cfg.migrationController }}
{{- if not (hasKey $migration "schedulerNames") }}
{{- $_ := set $migration "schedulerNames" (list (include "koordpy.scheduler.profile" .)) }}
{{- $_ := set $cfg "migrationController" $migration }}
{{- end }}
{{- toYaml $cfg }}
{{- end }}

{{/* "true" when the manager runs the LowNodeLoad balance round (manager.config.lowNodeLoad set), else empty:
it then reads the scheduler's configuration, files PodMigrationJobs and watches the workloads' replica counts. */}}
{{- define "koordpy.manager.balancing" -}}
{{- if hasKey .Values.manager.config "lowNodeLoad" }}{{ if not (kindIs "invalid" .Values.manager.config.lowNodeLoad) }}true{{ end }}{{ end }}
{{- end }}

{{/* The manager's leader election, as rendered into its configuration file. */}}
{{- define "koordpy.manager.leaderElection" -}}
{{- toYaml (get (include "koordpy.manager.config" . | fromYaml) "leaderElection") }}
{{- end }}

{{/* The manager Deployment's update strategy. With leader election (the default) a new pod starts beside
the old one and stands by with warm caches; the old one releases its Lease on SIGTERM and the new one
takes over within about retryPeriod: never two actors. Recreate (the old pod gone before the new one
starts) without leader election, and once when upgrading from a chart whose manager did not elect a
leader (its Deployment lacks the annotation koordpy.io/leader-election): such a manager would act beside
the new one. */}}
{{- define "koordpy.manager.strategy" -}}
{{- $election := include "koordpy.manager.leaderElection" . | fromYaml }}
{{- $existing := lookup "apps/v1" "Deployment" .Release.Namespace (printf "%s-manager" (include "koordpy.fullname" .)) }}
{{- $legacy := and $existing (not (hasKey (default (dict) $existing.metadata.annotations) "koordpy.io/leader-election")) }}
{{- if or (and (hasKey $election "leaderElect") (not $election.leaderElect)) $legacy }}
type: Recreate
{{- else }}
type: RollingUpdate
rollingUpdate:
  maxSurge: 1
  maxUnavailable: 0
{{- end }}
{{- end }}

{{/* The manager's health port, from its configuration file. */}}
{{- define "koordpy.manager.healthPort" -}}
{{- dig "health" "port" 8080 .Values.manager.config | int }}
{{- end }}

{{/* The agent's configuration file, apiVersion and kind filled in. */}}
{{- define "koordpy.agent.config" -}}
{{- $cfg := merge (deepCopy .Values.agent.config) (dict "apiVersion" "koordpy.io/v1alpha1" "kind" "AgentConfiguration") }}
{{- toYaml $cfg }}
{{- end }}

{{/* The agent's HTTP port (health, readiness, metrics), from its configuration file. */}}
{{- define "koordpy.agent.serverPort" -}}
{{- dig "server" "port" 9316 .Values.agent.config | int }}
{{- end }}

{{/* The agent's state directory, from its configuration file; a hostPath is mounted there. */}}
{{- define "koordpy.agent.stateDir" -}}
{{- dig "stateDir" "/var/lib/koordpy-agent" .Values.agent.config }}
{{- end }}

{{/* Contradictions fail at template time, not at run time. */}}
{{- define "koordpy.checks" -}}
{{- if and .Values.scheduler.enabled (gt (int .Values.scheduler.replicaCount) 1) (not .Values.scheduler.leaderElection.enabled) }}
{{- fail "scheduler.replicaCount > 1 needs scheduler.leaderElection.enabled: two unelected kube-schedulers would bind the same pods" }}
{{- end }}
{{- $managerElection := include "koordpy.manager.leaderElection" . | fromYaml }}
{{- if and .Values.manager.enabled (gt (int .Values.manager.replicaCount) 1) (hasKey $managerElection "leaderElect") (not $managerElection.leaderElect) }}
{{- fail "manager.replicaCount > 1 needs manager.config.leaderElection.leaderElect: unelected managers would all act" }}
{{- end }}
{{- $bind := dig "extender" "bindTimeoutSeconds" 4 .Values.scheduler.config | float64 }}
{{- $binder := include "koordpy.scheduler.binderHttpTimeout" . | float64 }}
{{- if ge $bind $binder }}
{{- fail (printf "scheduler.config.extender.bindTimeoutSeconds (%v) must be below scheduler.config.gang.binderHttpTimeoutSeconds (%v): kube-scheduler would give up on the bind first" $bind $binder) }}
{{- end }}
{{- if ne (dig "extender" "host" "127.0.0.1" .Values.scheduler.config) "127.0.0.1" }}
{{- fail "scheduler.config.extender.host must stay 127.0.0.1: the bind endpoint must not be reachable from outside the pod" }}
{{- end }}
{{- with include "koordpy.scheduler.metricsPort" . }}
{{- $taken := list (int (include "koordpy.scheduler.extenderPort" $)) (int $.Values.scheduler.kubeScheduler.securePort) }}
{{- if has (int .) $taken }}
{{- fail (printf "scheduler.config.extender.metricsPort (%s) must differ from extender.port and scheduler.kubeScheduler.securePort: the containers share the pod's network" .) }}
{{- end }}
{{- if has (dig "extender" "metricsHost" "0.0.0.0" $.Values.scheduler.config) (list "127.0.0.1" "localhost" "::1") }}
{{- fail "scheduler.config.extender.metricsHost must not be loopback: the kubelet probes and Prometheus scrapes the pod IP" }}
{{- end }}
{{- end }}
{{- include "koordpy.thresholdContract" . }}
{{- $actions := .Values.admissionPolicies.validationActions }}
{{- if and (has "Deny" $actions) (has "Warn" $actions) }}
{{- fail "admissionPolicies.validationActions: Deny and Warn together are not allowed (Kubernetes refuses the binding); use [Deny] or [Warn, Audit]" }}
{{- end }}
{{- /* Pod Security: on a live install (lookup answers; helm template has no cluster) refuse a namespace that
would admit the DaemonSet but refuse every agent pod, before anything is created. */}}
{{- if .Values.agent.enabled }}
{{- $namespace := lookup "v1" "Namespace" "" .Release.Namespace }}
{{- $enforce := dig "metadata" "labels" "pod-security.kubernetes.io/enforce" "" ($namespace | default dict) }}
{{- if has $enforce (list "baseline" "restricted") }}
{{- $why := ternary "its hostPath volumes" "its hostPath volumes and uid 0" (eq $enforce "baseline") }}
{{- fail (printf "namespace %s enforces Pod Security level %q, which refuses the agent's pods (%s): label it pod-security.kubernetes.io/enforce=privileged, or install the agent as its own release in a privileged namespace (agent.enabled=false here; docs/security.md)" .Release.Namespace $enforce $why) }}
{{- end }}
{{- end }}
{{- end }}

{{/* The scheduler Deployment's update strategy: with kube-scheduler's leader election a new pod starts
beside the old one and its kube-scheduler waits for the Lease, which the old one releases on SIGTERM
(ReleaseOnCancel); without it, Recreate (two unelected kube-schedulers would bind the same pods). */}}
{{- define "koordpy.scheduler.strategy" -}}
{{- if .Values.scheduler.leaderElection.enabled }}
type: RollingUpdate
rollingUpdate:
  maxSurge: 1
  maxUnavailable: 0
{{- else }}
type: Recreate
{{- end }}
{{- end }}

{{/*
The component's own Pod, from the downward API: where it posts the Warning Event CredentialsRefused once the
API server accepts its credentials again after refusing them (koordpy.kube.credentials).
*/}}
{{- define "koordpy.podIdentityEnv" -}}
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
{{- end }}

{{/*
The threshold contract (docs/descheduler.md, "The threshold contract"; the rule is
koordpy.descheduler.contract.check_thresholds, and tests/chart/test_threshold_contract.py checks that this
template refuses exactly what it calls a contradiction, on a table of cases). Without nodes: the agent's
capacity is taken to be the allocatable (the stricter form). Per resource (cpu, memory):
  T <= H   the extender's usageThresholds (aggregated.usageThresholds when configured; 0 = no limit) against
           each lowNodeLoad pool's highThresholds (and prodUsageThresholds against prodHighThresholds);
  H <= W   each pool's highThresholds against each evicting agent waterline (a cpu_total_utilization or
           memory_total_utilization rule of agent.qosPolicies whose AvoidanceAction evicts; when the list
           names no AvoidanceAction every rule is taken to evict; Preview rules never act);
  T <= W   the extender's threshold against each such waterline.
Pools with useDeviationThresholds are relative to their mean and not compared. Waterline values are read
when they are plain numbers ("70", 70, 70.5); the command `koordpy thresholds` reads any quantity.
*/}}
{{- define "koordpy.thresholdContract" -}}
{{- $found := list }}
{{- $resources := list "cpu" "memory" }}
{{- /* the extender's thresholds */}}
{{- $limits := list }}
{{- if .Values.scheduler.enabled }}
{{- $la := default (dict) .Values.scheduler.config.loadAware }}
{{- $plain := default (dict "cpu" 65 "memory" 95) $la.usageThresholds }}
{{- $plainPath := "scheduler.config.loadAware.usageThresholds" }}
{{- $agg := default (dict) $la.aggregated }}
{{- if and $agg.usageThresholds $agg.usageAggregationType }}
{{- $plain = $agg.usageThresholds }}
{{- $plainPath = "scheduler.config.loadAware.aggregated.usageThresholds" }}
{{- end }}
{{- range $r := $resources }}
{{- $limits = append $limits (dict "path" (printf "%s.%s" $plainPath $r) "resource" $r "value" (float64 (dig $r 0 $plain)) "prod" false) }}
{{- end }}
{{- range $r := $resources }}
{{- $v := float64 (dig $r 0 (default (dict) $la.prodUsageThresholds)) }}
{{- if gt $v 0.0 }}
{{- $limits = append $limits (dict "path" (printf "scheduler.config.loadAware.prodUsageThresholds.%s" $r) "resource" $r "value" $v "prod" true) }}
{{- end }}
{{- end }}
{{- end }}
{{- /* the descheduler's pools: the top level (when it sets a threshold), then nodePools inheriting it */}}
{{- $pools := list }}
{{- $lnl := dig "lowNodeLoad" nil .Values.manager.config }}
{{- if and .Values.manager.enabled $lnl }}
{{- $top := dict "path" "manager.config.lowNodeLoad" "deviation" (default false $lnl.useDeviationThresholds) }}
{{- range $field := list "highThresholds" "prodHighThresholds" }}
{{- $_ := set $top $field (default (dict) (get $lnl $field)) }}
{{- $_ := set $top (printf "%sPath" $field) "manager.config.lowNodeLoad" }}
{{- end }}
{{- if or $lnl.lowThresholds $lnl.highThresholds $lnl.prodLowThresholds $lnl.prodHighThresholds }}
{{- $pools = append $pools $top }}
{{- end }}
{{- range $i, $raw := default (list) $lnl.nodePools }}
{{- $path := printf "manager.config.lowNodeLoad.nodePools[%d]" $i }}
{{- $pool := dict "path" $path "deviation" (ternary $raw.useDeviationThresholds $top.deviation (hasKey $raw "useDeviationThresholds")) }}
{{- range $field := list "highThresholds" "prodHighThresholds" }}
{{- if hasKey $raw $field }}
{{- $_ := set $pool $field (default (dict) (get $raw $field)) }}
{{- $_ := set $pool (printf "%sPath" $field) $path }}
{{- else }}
{{- $_ := set $pool $field (get $top $field) }}
{{- $_ := set $pool (printf "%sPath" $field) "manager.config.lowNodeLoad" }}
{{- end }}
{{- end }}
{{- $pools = append $pools $pool }}
{{- end }}
{{- end }}
{{- /* the agent's evicting waterlines */}}
{{- $waterlines := list }}
{{- if .Values.agent.enabled }}
{{- $policies := default (list) .Values.agent.qosPolicies }}
{{- $evicting := dict }}
{{- $known := false }}
{{- range $obj := $policies }}
{{- if eq (default "" $obj.kind) "AvoidanceAction" }}
{{- $known = true }}
{{- if not (kindIs "invalid" (dig "spec" "eviction" nil $obj)) }}
{{- $_ := set $evicting (dig "metadata" "name" "" $obj) true }}
{{- end }}
{{- end }}
{{- end }}
{{- range $i, $obj := $policies }}
{{- $kind := default "" $obj.kind }}
{{- if has $kind (list "NodeQOSEnsurancePolicy" "NodeQOS") }}
{{- $field := ternary "rules" "objectiveEnsurances" (eq $kind "NodeQOS") }}
{{- range $j, $rule := default (list) (dig "spec" $field nil $obj) }}
{{- $metric := dig "metricRule" "name" "" $rule }}
{{- $value := toString (dig "metricRule" "value" "" $rule) }}
{{- $resource := get (dict "cpu_total_utilization" "cpu" "memory_total_utilization" "memory") $metric }}
{{- $acts := or (not $known) (hasKey $evicting (default "" $rule.actionName)) }}
{{- if and $resource $acts (ne (default "None" $rule.strategy) "Preview") (regexMatch "^[0-9]+(\\.[0-9]+)?$" $value) }}
{{- $waterlines = append $waterlines (dict "path" (printf "agent.qosPolicies[%d].spec.%s[%d].metricRule.value" $i $field $j) "resource" $resource "value" (float64 $value)) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- /* T <= H, PT <= PH */}}
{{- range $pool := $pools }}
{{- if not $pool.deviation }}
{{- range $limit := $limits }}
{{- $field := ternary "prodHighThresholds" "highThresholds" $limit.prod }}
{{- $highs := get $pool $field }}
{{- if hasKey $highs $limit.resource }}
{{- $h := float64 (get $highs $limit.resource) }}
{{- $hPath := printf "%s.%s.%s" (get $pool (printf "%sPath" $field)) $field $limit.resource }}
{{- if or (and (eq $limit.value 0.0) (lt $h 100.0)) (gt $limit.value $h) }}
{{- $found = append $found (printf "scheduler → descheduler: %s (%v) > %s (%v)" $limit.path $limit.value $hPath $h) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- /* H <= W and T <= W */}}
{{- range $w := $waterlines }}
{{- range $pool := $pools }}
{{- if and (not $pool.deviation) (hasKey $pool.highThresholds $w.resource) }}
{{- $h := float64 (get $pool.highThresholds $w.resource) }}
{{- if gt $h $w.value }}
{{- $found = append $found (printf "descheduler → agent: %s.highThresholds.%s (%v) > %s (%v)" $pool.highThresholdsPath $w.resource $h $w.path $w.value) }}
{{- end }}
{{- end }}
{{- end }}
{{- range $limit := $limits }}
{{- if and (not $limit.prod) (eq $limit.resource $w.resource) (or (eq $limit.value 0.0) (gt $limit.value $w.value)) }}
{{- $found = append $found (printf "scheduler → agent: %s (%v) > %s (%v)" $limit.path $limit.value $w.path $w.value) }}
{{- end }}
{{- end }}
{{- end }}
{{- if $found }}
{{- fail (printf "contradictory thresholds (each allows the loop it names; docs/descheduler.md, \"The threshold contract\"):\n- %s" (join "\n- " $found)) }}
{{- end }}
{{- end }}
