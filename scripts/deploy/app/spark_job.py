"""The JVM app: a Spark SQL job (pyspark from PyPI, the JDK in JAVA_HOME),
`local[1]`, over a generated CSV of sales.

    python spark_job.py DATA.csv

Ready marker: the line `result ...` with the query's answer; then it stops
Spark and exits.
"""
import sys

from pyspark.sql import SparkSession

spark = (SparkSession.builder.master("local[1]").appName("appflow-deploy-sql")
         .config("spark.ui.enabled", "false")
         .config("spark.sql.shuffle.partitions", "4")
         .getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
df = spark.read.csv(sys.argv[1], header=True, inferSchema=True)
df.createOrReplaceTempView("sales")
rows = spark.sql(
    "SELECT region, count(*) AS n, round(sum(amount), 2) AS total "
    "FROM sales WHERE amount > 10 GROUP BY region ORDER BY total DESC LIMIT 3").collect()
print("result " + "; ".join(f"{r['region']} {r['n']} {r['total']}" for r in rows), flush=True)
spark.stop()
