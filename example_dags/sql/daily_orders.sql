-- One day of orders, built from a generated source so the example runs anywhere.
-- Rendered by Jinja: {{ ds }} is the logical date.
SELECT
    id AS order_id,
    CAST('{{ ds }}' AS DATE) AS order_date,
    element_at(array('DE', 'FR', 'NL', 'US'), CAST(id % 4 AS INT) + 1) AS country,
    concat('customer-', CAST(id % 97 AS STRING)) AS customer,
    ROUND(10 + (id % 1000) / 7.0, 2) AS amount
FROM range(10000);
