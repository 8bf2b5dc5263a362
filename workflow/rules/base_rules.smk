# The two base rules every paper's registry (src/featlearn/<paper>/registry.py) is turned into, written
# once: a compute rule for each registry Job, a figure rule for each Figure (figures, tables or a check: one
# rule writes the record's drawing and each of its further drawings, and its claims table).
# Included after every paper's rules file: register_paper() (common.smk) has collected the records by then;
# the helpers the rules use (named_paths, figure_outputs, ...) live in common.smk.


# Compute rules: `python -m featlearn compute` with named inputs and outputs.
for job in REGISTERED_JOBS:

    rule:
        name:
            job.name
        input:
            unpack(job.inputs) if callable(job.inputs) else [],
            **({} if callable(job.inputs) else job.inputs),
        output:
            **job.outputs,
        log:
            PATHS.log(job.paper, job.stem),
        benchmark:
            PATHS.benchmark(job.paper, job.stem)
        wildcard_constraints:
            **job.wildcards,
        priority: job_priority(job)
        conda:
            ENV
        threads: job.threads
        resources:
            mem_mb=job_limit(job, "mem_mb"),
            runtime=job_limit(job, "runtime"),
            gpu=gpu_slots(job),
            gpu_mem_mb=job_gpu_memory(job),
        params:
            **usage_param(PATHS.benchmark(job.paper, job.stem)),
            run=job.run,
            settings=job_settings(job),
            inputs=lambda wildcards, input: named_paths(input),
            outputs=lambda wildcards, output: named_paths(output),
            work_dir=job_work_dir(job),
            device=job_device(job),
            precision=job_precision(job),
            code=job_code(job),
            # the numeric threads are the rule's own, not the count Snakemake scales down to --cores, so
            # that a job's numbers do not depend on how many cores the run was given
            torch_threads=job.threads,
        shell:
            SERVER_ENV
            + "python -m featlearn compute --run {params.run} --settings {params.settings:q}"
            " --inputs {params.inputs:q} --outputs {params.outputs:q} --threads {params.torch_threads}"
            " --device {params.device} --precision {params.precision}"
            " --gpu-mem-mb {resources.gpu_mem_mb}"
            " --work-dir={params.work_dir:q} > {log} 2>&1"


# Figure rules: fig_<paper>_<n>, table_<paper>_<n> or check_<paper>_<id>.
for fig in REGISTERED_FIGURES:

    rule:
        name:
            fig.rule
        input:
            **fig.inputs,
        output:
            **figure_outputs(fig),
        log:
            PATHS.log(fig.paper, fig.log_stem),
        benchmark:
            PATHS.benchmark(fig.paper, fig.log_stem)
        localrule: True
        conda:
            ENV
        params:
            **usage_param(PATHS.benchmark(fig.paper, fig.log_stem)),
            draw=fig.draw or "",
            claims_fn=fig.claims or "",
            inputs=lambda wildcards, input: named_paths(input),
            drawn=lambda wildcards, output: drawn_files(output),
            also=further_drawings(fig, figure_outputs(fig)),
            claims=lambda wildcards, output: output.get("claims", ""),
            settings=fig.settings_json(),
            claim_ids=fig.claim_ids_json(),
            scale=SCALE,
            dpi=config["report"]["dpi"],
            code=figure_code(fig),
        shell:
            SERVER_ENV
            + "python -m featlearn figure --draw={params.draw:q} --claims-fn={params.claims_fn:q}"
            " --inputs {params.inputs:q} --settings {params.settings:q} --figures {params.drawn:q}"
            " --also {params.also:q}"
            " --claims={params.claims:q} --claim-ids {params.claim_ids:q} --scale {params.scale}"
            " --dpi {params.dpi} > {log} 2>&1"


# Figures this run cannot make (data or checkpoints missing) keep their rule name: asking for one stops
# building the DAG with one line saying why and what to do (featlearn.pipeline.targets); their claims are listed
# as unchecked, with that reason, so the scorecard's denominator shows what was not tested. `make figures`
# lists every target.
for _rule, (_fig, _why) in unavailable_figures(
    config, PATHS, {f.rule for f in REGISTERED_FIGURES}, SKIPPED
).items():
    PAPER_UNCHECKED[_fig.paper].update(
        unchecked_claims(_fig, _why, PAPER_UNCHECKED[_fig.paper])
    )

    rule:
        name:
            _rule
        input:
            cannot_run(_why),
        localrule: True
