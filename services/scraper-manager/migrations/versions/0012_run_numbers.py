"""Run numbers per scraper (#1, #2, #3 for each scraper, where the global ids left gaps):
`runs.number`, given at insert by a trigger from the scraper's own counter
(`scrapers.runs_numbered`), so every way a run is made (a start, a schedule's firing, a
skipped firing, a test's INSERT) is numbered alike, and a number is never given twice even
after retention deleted the latest runs. Existing runs are numbered in the order they were
made (their ids).

Revision ID: 0012_run_numbers
Revises: 0011_retention
"""

import sqlalchemy as sa
from alembic import op

revision = "0012_run_numbers"
down_revision = "0011_retention"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "scrapers",
        sa.Column("runs_numbered", sa.Integer(), nullable=False, server_default="0"),
    )
    op.add_column("runs", sa.Column("number", sa.Integer(), nullable=True))
    op.execute(
        """
        UPDATE runs SET number = numbered.n
        FROM (SELECT id, row_number() OVER (PARTITION BY scraper_id ORDER BY id) AS n
              FROM runs) AS numbered
        WHERE runs.id = numbered.id
        """
    )
    op.execute(
        """
        UPDATE scrapers SET runs_numbered = coalesce(
            (SELECT max(number) FROM runs WHERE runs.scraper_id = scrapers.id), 0)
        """
    )
    # The scraper's row is updated in the inserting transaction: two runs of one scraper made
    # at once wait for each other (a start already locks it; a schedule's firing too).
    op.execute(
        """
        CREATE FUNCTION number_run() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            UPDATE scrapers SET runs_numbered = runs_numbered + 1
            WHERE id = NEW.scraper_id
            RETURNING runs_numbered INTO NEW.number;
            RETURN NEW;
        END
        $$
        """
    )
    op.execute(
        """
        CREATE TRIGGER runs_number BEFORE INSERT ON runs
        FOR EACH ROW WHEN (NEW.number IS NULL) EXECUTE FUNCTION number_run()
        """
    )
    op.alter_column("runs", "number", nullable=False)
    op.create_unique_constraint("uq_runs_scraper_number", "runs", ["scraper_id", "number"])


def downgrade() -> None:
    op.drop_constraint("uq_runs_scraper_number", "runs", type_="unique")
    op.execute("DROP TRIGGER runs_number ON runs")
    op.execute("DROP FUNCTION number_run()")
    op.drop_column("runs", "number")
    op.drop_column("scrapers", "runs_numbered")
